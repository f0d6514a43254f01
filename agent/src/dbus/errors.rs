//! Every agent error becomes one `org.gdr.Agent1.Error.*` name, here and only here.

use crate::daemon::AgentError;

/// The interface's errors.
#[derive(Debug, zbus::DBusError)]
#[zbus(prefix = "org.gdr.Agent1.Error")]
pub enum Error {
    #[zbus(error)]
    ZBus(zbus::Error),
    NoSuchCard(String),
    NotReady(String),
    Busy(String),
    AccessDenied(String),
    InvalidArgument(String),
    InvalidConfig(String),
    Failed(String),
}

impl From<AgentError> for Error {
    fn from(e: AgentError) -> Self {
        let m = e.to_string();
        match e {
            AgentError::NoSuchCard(_) => Error::NoSuchCard(m),
            AgentError::NotReady(_) => Error::NotReady(m),
            AgentError::Busy(_) => Error::Busy(m),
            AgentError::AccessDenied(_) => Error::AccessDenied(m),
            AgentError::InvalidArgument(_) => Error::InvalidArgument(m),
            AgentError::InvalidConfig(_) => Error::InvalidConfig(m),
            AgentError::Failed(_) => Error::Failed(m),
        }
    }
}
