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

/// Why a helper request did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error("privileged helper at {}: {source}", socket.display())]
    Connect {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("privileged helper, '{request}': {source}")]
    Io {
        request: String,
        source: std::io::Error,
    },
    /// The helper ran and said no (or its job failed).
    #[error("'{request}': {why}")]
    Refused { request: String, why: String },
    #[error("'{request}': the helper answered '{}'", reply.escape_debug())]
    Garbled { request: String, reply: String },
}

impl Helper {
    /// Sends `req`; returns the text after `ok`.
    pub fn call(&self, req: &Request) -> Result<String, HelperError> {
        let request = req.line();
        let io = |source| HelperError::Io {
            request: request.clone(),
            source,
        };
        let stream = UnixStream::connect(&self.socket).map_err(|source| HelperError::Connect {
            socket: self.socket.clone(),
            source,
        })?;
        stream.set_read_timeout(Some(self.timeout)).map_err(io)?;
        (&stream)
            .write_all(format!("{request}\n").as_bytes())
            .map_err(io)?;
        let mut reply = String::new();
        BufReader::new(&stream).read_line(&mut reply).map_err(io)?;
        let reply = reply.trim_end();
        match reply.split_once(' ').unwrap_or((reply, "")) {
            ("ok", rest) => Ok(rest.to_string()),
            ("error", why) => Err(HelperError::Refused {
                request,
                why: why.to_string(),
            }),
            _ => Err(HelperError::Garbled {
                request,
                reply: reply.to_string(),
            }),
        }
    }
}
