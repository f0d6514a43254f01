//! Child processes in their own process groups, so everything a child starts (in-root.sh's unshare, chroot
//! and QEMU) can be killed at once, and is killed when the harness is done with it.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

/// A child process leader of its own group; the whole group is killed on drop.
pub struct Group {
    pub name: &'static str,
    child: Child,
    reaped: Option<ExitStatus>,
    stopped: bool,
}

impl Group {
    pub fn spawn(name: &'static str, cmd: &mut Command) -> io::Result<Self> {
        let child = cmd
            .process_group(0)
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("starting {name}: {e}")))?;
        Ok(Group {
            name,
            child,
            reaped: None,
            stopped: false,
        })
    }

    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The exit status if the leader has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.reaped.is_none() {
            self.reaped = self.child.try_wait().ok().flatten();
        }
        self.reaped
    }

    /// Waits up to `limit` for the leader to exit.
    pub fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + limit;
        loop {
            if let Some(s) = self.try_wait() {
                return Some(s);
            }
            if Instant::now() >= end {
                return None;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `sig` to every process of the group.
    pub fn signal(&self, sig: libc::c_int) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals our child's process group only; it touches no memory.
        unsafe { libc::kill(-pgid, sig) };
    }

    /// SIGTERM, a short grace period, then SIGKILL; reaps the leader.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        if self.stopped {
            return self.reaped;
        }
        self.stopped = true;
        if self.try_wait().is_none() {
            self.signal(libc::SIGTERM);
            if self.wait_for(Duration::from_secs(3)).is_none() {
                eprintln!("[gdr-bench] {} ignored SIGTERM; killing it", self.name);
                self.signal(libc::SIGKILL);
                self.wait_for(Duration::from_secs(5));
            }
        }
        // Children of the leader may outlive it. The id names our group while any member lives; reuse by
        // someone else in the instant since the leader was reaped would need a pid wrap.
        self.signal(libc::SIGKILL);
        self.reaped
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Processes of group `pgid` that are not zombies (an orphan's zombie lingers until init reaps it).
    fn live_members(pgid: u32) -> Vec<String> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter(|stat| {
                // Fields after the ")" that ends the command name: state ppid pgrp ...
                let rest: Vec<&str> = stat
                    .rsplit_once(") ")
                    .map_or("", |r| r.1)
                    .split(' ')
                    .collect();
                rest.len() > 2 && rest[2] == pgid.to_string() && rest[0] != "Z"
            })
            .collect()
    }

    #[test]
    fn stop_kills_the_whole_group() {
        // The shell's child `sleep` must die with the group, not only the shell.
        let mut g = Group::spawn("sh", Command::new("sh").args(["-c", "sleep 60 & wait"])).unwrap();
        let pgid = g.child_mut().id();
        thread::sleep(Duration::from_millis(200));
        assert!(g.try_wait().is_none());
        assert_eq!(live_members(pgid).len(), 2, "sh and sleep");
        g.stop();
        thread::sleep(Duration::from_millis(100));
        assert_eq!(
            live_members(pgid),
            Vec::<String>::new(),
            "process group survived"
        );
    }
}
