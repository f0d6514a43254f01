//! `org.gdr.Agent1.Manager2` at `/org/gdr/Agent1`: version 2 of the manager interface (with `Card2`).

use std::sync::Arc;

use zbus::interface;
use zbus::object_server::SignalEmitter;

use super::errors::Error;
use crate::daemon::Agent;

/// The manager object.
pub struct Manager {
    pub agent: Arc<Agent>,
}

#[interface(name = "org.gdr.Agent1.Manager2")]
impl Manager {
    /// Indexes of the configured cards (objects `/org/gdr/Agent1/cardN`).
    fn list_cards(&self) -> Vec<u32> {
        (0..self.agent.card_count() as u32).collect()
    }

    /// Whether every card is ready or failed (what READY=1 told systemd).
    fn settled(&self) -> bool {
        self.agent.settled()
    }

    /// Re-reads the config file; all or nothing (InvalidConfig names file, line and key).
    async fn reload(
        &self,
        #[zbus(header)] hdr: zbus::message::Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<(), Error> {
        super::card_2::authorize_admin(&self.agent, &hdr, conn).await?;
        let agent = self.agent.clone();
        blocking::unblock(move || agent.reload()).await?;
        Self::reloaded(&emitter).await?;
        Ok(())
    }

    /// Agent version (the API version is the interface name's suffix).
    #[zbus(property(emits_changed_signal = "const"))]
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }

    /// `STATUS=` text: one summary per card; signalled when it changes.
    #[zbus(property)]
    fn status(&self) -> String {
        self.agent.status_text()
    }

    /// The configuration was reloaded.
    #[zbus(signal)]
    async fn reloaded(emitter: &SignalEmitter<'_>) -> zbus::Result<()>;
}
