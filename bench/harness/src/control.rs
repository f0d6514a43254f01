//! Client of the FPGA model's control socket: newline-delimited JSON, one request line, one response line.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use gdr_model_control::{Request, parse_reply};
use serde::de::DeserializeOwned;

/// The model answers at once; this only guards against a wedged model.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Sends one request line (without newline) and returns the response line (without newline). One
/// connection per request, so the relay and the harness never hold the socket for each other.
pub fn request(socket: &Path, line: &str) -> io::Result<String> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    s.write_all(line.trim_end().as_bytes())?;
    s.write_all(b"\n")?;
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer)?;
    if answer.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "model closed the control connection",
        ));
    }
    Ok(answer.trim_end().to_string())
}

/// `FAULT[:COUNT]` → the inject request; COUNT defaults to 1, 0 means until cleared.
pub fn inject_request(spec: &str) -> Result<Request, String> {
    let (fault, count) = match spec.split_once(':') {
        Some((f, c)) => (
            f,
            c.parse::<u64>()
                .map_err(|e| format!("--inject {spec}: count: {e}"))?,
        ),
        None => (spec, 1),
    };
    if fault.is_empty() {
        return Err(format!("--inject {spec}: no fault name"));
    }
    Ok(Request::inject(fault, count))
}

/// Sends a request and reads the model's reply as `T`; a refusal is an error.
pub fn call_ok<T: DeserializeOwned>(socket: &Path, req: &Request) -> Result<T, String> {
    let line = req.to_line();
    let answer = request(socket, &line).map_err(|e| format!("model control {line}: {e}"))?;
    parse_reply(&answer).map_err(|e| format!("model control {line}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_spec() {
        assert_eq!(
            inject_request("corrupt_data").unwrap(),
            Request::inject("corrupt_data", 1)
        );
        assert_eq!(
            inject_request("hang:0").unwrap(),
            Request::inject("hang", 0)
        );
        assert!(inject_request("hang:x").is_err());
        assert!(inject_request(":3").is_err());
    }
}
