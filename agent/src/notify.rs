//! sd_notify(3) by hand: one datagram to `$NOTIFY_SOCKET` (a path, or `@name` for an abstract socket).
//! Without the variable (not started by systemd) every call is a no-op.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `state` (e.g. `READY=1\nSTATUS=...`). Errors are returned, never fatal to the caller.
pub fn notify(state: &str) -> std::io::Result<()> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(());
    };
    let path = path.to_string_lossy();
    let addr = match path.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None => SocketAddr::from_pathname(&*path)?,
    };
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

/// The watchdog interval systemd asked for (`WATCHDOG_USEC`, for this pid), if any.
pub fn watchdog_usec() -> Option<u64> {
    let pid = std::env::var("WATCHDOG_PID").ok();
    if pid.is_some_and(|p| p.parse::<u32>().ok() != Some(std::process::id())) {
        return None;
    }
    std::env::var("WATCHDOG_USEC")
        .ok()?
        .parse()
        .ok()
        .filter(|&u| u > 0)
}

/// `STATUS=` text must be one line.
pub fn status_line(text: &str) -> String {
    format!("STATUS={}", text.replace('\n', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_path_and_abstract_sockets() {
        // One test owns NOTIFY_SOCKET (tests run in parallel threads of one process).
        let dir = std::env::temp_dir().join(format!("gdr-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("notify");
        let rx = UnixDatagram::bind(&p).unwrap();
        // SAFETY: no other test reads or writes NOTIFY_SOCKET.
        unsafe { std::env::set_var("NOTIFY_SOCKET", &p) };
        notify("READY=1\nSTATUS=ok").unwrap();
        let mut buf = [0; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=ok");

        let name = format!("gdr-notify-test-{}", std::process::id());
        let rx = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
            .unwrap();
        // SAFETY: as above.
        unsafe { std::env::set_var("NOTIFY_SOCKET", format!("@{name}")) };
        notify("WATCHDOG=1").unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
        // SAFETY: as above.
        unsafe { std::env::remove_var("NOTIFY_SOCKET") };
        notify("READY=1").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(status_line("a\nb"), "STATUS=a b");
    }
}
