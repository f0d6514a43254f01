//! The agent's side of the privileged helper: connect to its socket (systemd starts one helper instance
//! per connection), send one request, read one reply: `ok ...` or `error ...`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use super::request::Request;

/// Client of the helper socket.
#[derive(Clone, Debug)]
pub struct Helper {
    pub socket: PathBuf,
    /// JTAG flash writes take long; PCI requests are quick.
    pub timeout: Duration,
}

impl Helper {
    /// Sends `req`; returns the text after `ok`.
    pub fn call(&self, req: &Request) -> Result<String, String> {
        let what = req.line();
        let stream = UnixStream::connect(&self.socket)
            .map_err(|e| format!("privileged helper at {}: {e}", self.socket.display()))?;
        stream
            .set_read_timeout(Some(self.timeout))
            .map_err(|e| e.to_string())?;
        (&stream)
            .write_all(format!("{what}\n").as_bytes())
            .map_err(|e| format!("privileged helper: {e}"))?;
        let mut reply = String::new();
        BufReader::new(&stream)
            .read_line(&mut reply)
            .map_err(|e| format!("privileged helper, '{what}': {e}"))?;
        let reply = reply.trim_end();
        match reply.split_once(' ').unwrap_or((reply, "")) {
            ("ok", rest) => Ok(rest.to_string()),
            ("error", why) => Err(format!("'{what}': {why}")),
            _ => Err(format!(
                "'{what}': the helper answered '{}'",
                reply.escape_debug()
            )),
        }
    }
}
