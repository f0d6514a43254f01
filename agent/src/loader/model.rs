//! Programs the FPGA model the way JTAG programs a card: `{"cmd":"program",...}` over its control channel
//! (a virtio-serial port in the appliance VM, a UNIX socket on the host). The model drops the link, loads
//! the image (or falls back to its golden design if the image is corrupt) and comes back.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use gdr_model_control::{
    Loaded, ProgramReply, ProgramStateReply, ProgramTarget, Request, parse_reply,
};
use serde::de::DeserializeOwned;

use crate::card::ports::{LoadError, Loader};
use crate::config::Target;
use crate::manifest::Image;

/// The `model` loader.
pub struct ModelLoader {
    pub port: PathBuf,
    pub timeout: Duration,
}

/// Why an exchange with the model failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model port {}: {source}", port.display())]
    Open {
        port: PathBuf,
        source: std::io::Error,
    },
    #[error("model port: {0}")]
    Io(#[source] std::io::Error),
    #[error("model port: closed without an answer")]
    Closed,
    #[error("the model did not answer within {} s", waited.as_secs())]
    Silent { waited: Duration },
    #[error("poll: {0}")]
    Poll(#[source] std::io::Error),
    /// The model refused, or its reply did not parse (the control crate's text).
    #[error("model: {0}")]
    Reply(String),
    #[error("{}: not a model image: {source}", path.display())]
    NotAnImage {
        path: PathBuf,
        source: std::str::Utf8Error,
    },
}

/// A duplex byte stream: a socket or a character device.
trait Channel: Read + Write + AsRawFd {}
impl Channel for UnixStream {}
impl Channel for std::fs::File {}

impl ModelLoader {
    fn open(&self) -> Result<Box<dyn Channel>, ModelError> {
        let p = &self.port;
        let at = |source| ModelError::Open {
            port: p.clone(),
            source,
        };
        let meta = std::fs::metadata(p).map_err(at)?;
        use std::os::unix::fs::FileTypeExt;
        if meta.file_type().is_socket() {
            Ok(Box::new(UnixStream::connect(p).map_err(at)?))
        } else {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(p)
                .map_err(at)?;
            Ok(Box::new(f))
        }
    }

    /// Sends one request line and reads its reply line, giving up after `timeout`.
    ///
    /// The channel may still hold the reply to a request of an agent that was killed before it read it
    /// (virtio-serial keeps it until the port is opened again). So the exchange starts with a
    /// `program_state` request, whose reply no `program` produces, and drops every line before that reply.
    pub fn request<T: DeserializeOwned>(&self, req: &Request) -> Result<T, ModelError> {
        let mut ch = BufReader::new(self.open()?);
        send(ch.get_mut(), &Request::ProgramState {})?;
        let deadline = Instant::now() + self.timeout;
        while parse_reply::<ProgramStateReply>(&read_reply(&mut ch, deadline)?).is_err() {
            log::warn!("model port: dropped a reply nobody read (an earlier agent's)");
        }
        send(ch.get_mut(), req)?;
        let line = read_reply(&mut ch, Instant::now() + self.timeout)?;
        parse_reply(&line).map_err(ModelError::Reply)
    }
}

fn send(ch: &mut Box<dyn Channel>, req: &Request) -> Result<(), ModelError> {
    ch.write_all(format!("{}\n", req.to_line()).as_bytes())
        .map_err(ModelError::Io)
}

/// The next reply line, waiting until `deadline` for it.
fn read_reply(
    ch: &mut BufReader<Box<dyn Channel>>,
    deadline: Instant,
) -> Result<String, ModelError> {
    if ch.buffer().is_empty() {
        wait_readable(
            ch.get_ref().as_raw_fd(),
            deadline.saturating_duration_since(Instant::now()),
        )?;
    }
    let mut reply = String::new();
    ch.read_line(&mut reply).map_err(ModelError::Io)?;
    if reply.is_empty() {
        return Err(ModelError::Closed);
    }
    Ok(reply)
}

fn wait_readable(fd: i32, timeout: Duration) -> Result<(), ModelError> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut pfd, 1, ms) };
    match n {
        1.. => Ok(()),
        0 => Err(ModelError::Silent { waited: timeout }),
        _ => Err(ModelError::Poll(std::io::Error::last_os_error())),
    }
}

impl Loader for ModelLoader {
    fn name(&self) -> &'static str {
        "model"
    }

    fn image_role(&self, _: Target) -> &'static str {
        "model-update"
    }

    fn program(&self, image: &Image, target: Target) -> Result<String, LoadError> {
        self.program_model(image, target)
            .map_err(|e| LoadError(e.into()))
    }
}

impl ModelLoader {
    fn program_model(&self, image: &Image, target: Target) -> Result<String, ModelError> {
        // The checked bytes, not the file again: it may have changed since it was checked.
        let text = std::str::from_utf8(&image.bytes).map_err(|source| ModelError::NotAnImage {
            path: image.file.path.clone(),
            source,
        })?;
        let target = match target {
            Target::Flash => ProgramTarget::Flash,
            Target::Sram => ProgramTarget::Sram,
        };
        let r: ProgramReply = self.request(&Request::Program {
            image: text.to_string(),
            target,
        })?;
        let loaded = match r.loaded {
            Loaded::Start => "start",
            Loaded::Update => "update",
            Loaded::Golden => "golden",
        };
        Ok(format!("model loaded the {loaded} design"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{ImageFile, Manifest};
    use std::os::unix::net::UnixListener;

    /// `text` written to `path` and checked as the manifest's model image.
    fn checked(path: &std::path::Path, text: &str) -> Image {
        std::fs::write(path, text).unwrap();
        Manifest {
            version: "1.0.0".into(),
            expected: Default::default(),
            golden: None,
            files: vec![ImageFile {
                path: path.to_path_buf(),
                role: "model-update".into(),
                sha256: crate::manifest::sha256_hex(text.as_bytes()),
            }],
        }
        .image("model-update")
        .unwrap()
    }

    const PROGRAM_STATE: &str = "{\"ok\":true,\"running\":\"start\",\"programs\":3,\"fallbacks\":0,\
        \"golden_version\":1,\"program_fault_armed\":false}\n";
    const GOLDEN: &str = "{\"ok\":true,\"loaded\":\"golden\",\"reason\":\"corrupt\",\"design\":\"gdr\",\
        \"design_version\":1,\"build_hash\":2}\n";
    const UPDATE: &str = "{\"ok\":true,\"loaded\":\"update\",\"reason\":\"\",\"design\":\"gdr\",\
        \"design_version\":1,\"build_hash\":2}\n";

    /// A model that answers the sync request, then one request with `reply` ("" = never), after first
    /// writing `stale` (an earlier agent's unread reply).
    fn serve_after(
        stale: &'static str,
        reply: &'static str,
    ) -> (PathBuf, std::thread::JoinHandle<String>) {
        let p = std::env::temp_dir().join(format!(
            "gdr-model-{}-{}-{}",
            std::process::id(),
            reply.len(),
            stale.len()
        ));
        let _ = std::fs::remove_file(&p);
        let l = UnixListener::bind(&p).unwrap();
        let h = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            (&s).write_all(stale.as_bytes()).unwrap();
            let mut r = BufReader::new(&s);
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            assert!(line.contains("program_state"), "{line}");
            (&s).write_all(PROGRAM_STATE.as_bytes()).unwrap();
            line.clear();
            r.read_line(&mut line).unwrap();
            if !reply.is_empty() {
                (&s).write_all(reply.as_bytes()).unwrap();
            } else {
                std::thread::sleep(Duration::from_millis(400));
            }
            line
        });
        (p, h)
    }

    fn serve(reply: &'static str) -> (PathBuf, std::thread::JoinHandle<String>) {
        serve_after("", reply)
    }

    #[test]
    fn an_earlier_agents_unread_reply_is_not_taken_for_this_one() {
        let (p, h) = serve_after(GOLDEN, UPDATE);
        let img = checked(&p.with_extension("img"), "gdr-model-image 1\n");
        let l = ModelLoader {
            port: p,
            timeout: Duration::from_secs(5),
        };
        assert_eq!(
            l.program(&img, Target::Flash).unwrap(),
            "model loaded the update design"
        );
        assert!(h.join().unwrap().contains("\"program\""));
    }

    #[test]
    fn sends_the_image_and_reads_the_reply() {
        let (p, h) = serve(UPDATE);
        let img = checked(&p.with_extension("img"), "gdr-model-image 1\n");
        // Replaced after the check (as between the hash and the PCI remove): the checked bytes still go.
        std::fs::write(&img.file.path, "gdr-model-image 666\n").unwrap();
        let l = ModelLoader {
            port: p.clone(),
            timeout: Duration::from_secs(5),
        };
        assert_eq!(
            l.program(&img, Target::Flash).unwrap(),
            "model loaded the update design"
        );
        assert_eq!(
            Request::from_line(&h.join().unwrap()).unwrap(),
            Request::Program {
                image: "gdr-model-image 1\n".into(),
                target: ProgramTarget::Flash
            }
        );
    }

    #[test]
    fn refusal_and_silence_are_errors() {
        let (p, _h) = serve("{\"ok\":false,\"error\":\"no\"}\n");
        let l = ModelLoader {
            port: p,
            timeout: Duration::from_secs(5),
        };
        assert_eq!(
            l.request::<ProgramStateReply>(&Request::State {})
                .unwrap_err()
                .to_string(),
            "model: no"
        );
        let (p, _h) = serve("");
        let l = ModelLoader {
            port: p,
            timeout: Duration::from_millis(100),
        };
        assert!(
            l.request::<ProgramStateReply>(&Request::State {})
                .unwrap_err()
                .to_string()
                .contains("did not answer")
        );
        let l = ModelLoader {
            port: "/nonexistent/port".into(),
            timeout: Duration::from_millis(100),
        };
        assert!(
            l.request::<ProgramStateReply>(&Request::State {})
                .unwrap_err()
                .to_string()
                .contains("/nonexistent/port")
        );
    }
}
