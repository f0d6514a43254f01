//! Every way a client call can fail, typed so applications can react (and C callers get a stable code).

use std::fmt;

use crate::capi;

/// A failed client call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Nobody owns `org.gdr.Agent1` on the bus: the agent is not running.
    AgentNotRunning,
    /// The bus itself could not be reached or misbehaved.
    Bus(String),
    /// The agent refused: the caller is not in the configured users/groups.
    AccessDenied(String),
    /// No such card, or the card is not ready.
    NoSuchCard(String),
    /// The card is not ready (programming, failed, removed).
    NotReady(String),
    /// Any other error the agent returned: its D-Bus error name and message.
    Agent { name: String, message: String },
    /// An ioctl or system call failed: what was attempted and the errno.
    Os { op: &'static str, errno: i32 },
    /// A bad argument, caught before anything was sent.
    InvalidArgument(String),
    /// The agent did not answer within the connection's method timeout (a wedged agent).
    Timeout(String),
}

impl Error {
    /// The errno of an OS error (ENODEV after the card was reprogrammed or removed).
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Os { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    /// The stable numeric code the C API returns (negative).
    pub fn code(&self) -> i32 {
        match self {
            Error::AgentNotRunning => capi::GDRPICO_E_NO_AGENT,
            Error::Bus(_) => capi::GDRPICO_E_BUS,
            Error::AccessDenied(_) => capi::GDRPICO_E_ACCESS,
            Error::NoSuchCard(_) => capi::GDRPICO_E_NO_CARD,
            Error::NotReady(_) => capi::GDRPICO_E_NOT_READY,
            Error::Agent { .. } => capi::GDRPICO_E_AGENT,
            Error::Os { .. } => capi::GDRPICO_E_OS,
            Error::InvalidArgument(_) => capi::GDRPICO_E_INVALID,
            Error::Timeout(_) => capi::GDRPICO_E_TIMEOUT,
        }
    }

    pub(crate) fn last_os(op: &'static str) -> Self {
        Error::Os {
            op,
            errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::AgentNotRunning => f.write_str(
                "the gdr agent is not running (no owner of org.gdr.Agent1 on the system bus)",
            ),
            Error::Bus(m) => write!(f, "D-Bus: {m}"),
            Error::AccessDenied(m) => write!(f, "access denied: {m}"),
            Error::NoSuchCard(m) => write!(f, "no such card: {m}"),
            Error::NotReady(m) => write!(f, "card not ready: {m}"),
            Error::Agent { name, message } => write!(f, "{name}: {message}"),
            Error::Os { op, errno } => {
                write!(f, "{op}: {}", std::io::Error::from_raw_os_error(*errno))
            }
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Timeout(m) => write!(f, "the gdr agent did not answer: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<zbus::Error> for Error {
    fn from(e: zbus::Error) -> Self {
        match e {
            zbus::Error::MethodError(name, message, _) => {
                let message = message.unwrap_or_default();
                match name.as_str() {
                    "org.freedesktop.DBus.Error.ServiceUnknown"
                    | "org.freedesktop.DBus.Error.NameHasNoOwner" => Error::AgentNotRunning,
                    "org.gdr.Agent1.Error.AccessDenied"
                    | "org.freedesktop.DBus.Error.AccessDenied" => Error::AccessDenied(message),
                    "org.gdr.Agent1.Error.NoSuchCard"
                    | "org.freedesktop.DBus.Error.UnknownObject" => Error::NoSuchCard(message),
                    "org.gdr.Agent1.Error.NotReady" => Error::NotReady(message),
                    _ => Error::Agent {
                        name: name.to_string(),
                        message,
                    },
                }
            }
            zbus::Error::FDO(e) => match *e {
                zbus::fdo::Error::ServiceUnknown(_) | zbus::fdo::Error::NameHasNoOwner(_) => {
                    Error::AgentNotRunning
                }
                zbus::fdo::Error::AccessDenied(m) => Error::AccessDenied(m),
                zbus::fdo::Error::UnknownObject(m) => Error::NoSuchCard(m),
                other => Error::Bus(other.to_string()),
            },
            zbus::Error::InputOutput(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                Error::Timeout(e.to_string())
            }
            other => Error::Bus(other.to_string()),
        }
    }
}
