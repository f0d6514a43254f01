//! The D-Bus face of the agent (zbus): it only adapts [`crate::daemon::Agent`]. One file per interface
//! and version (`manager_1`, `card_1`); a later, incompatible version gets new files beside these, and
//! errors are mapped in one place (`errors`).

pub mod card_1;
pub mod errors;
pub mod manager_1;

use std::sync::Arc;

use gdr_client::{BUS_NAME, MANAGER_PATH, card_path};
use zbus::blocking::Connection;

use crate::daemon::{Agent, Change};

/// Connects (system bus, or `address`), serves every object, takes the well-known name and forwards the
/// agent's changes as signals.
pub fn serve(agent: &Arc<Agent>, address: Option<&str>) -> zbus::Result<Connection> {
    let mut b = match address {
        Some(a) => zbus::blocking::connection::Builder::address(a)?,
        None => zbus::blocking::connection::Builder::system()?,
    };
    b = b.serve_at(
        MANAGER_PATH,
        manager_1::Manager {
            agent: agent.clone(),
        },
    )?;
    for i in 0..agent.card_count() as u32 {
        b = b.serve_at(
            card_path(i),
            card_1::Card {
                agent: agent.clone(),
                index: i,
            },
        )?;
    }
    // Bounds every call the agent makes, the liveness ping included (`alive`).
    let conn = b
        .name(BUS_NAME)?
        .method_timeout(std::time::Duration::from_secs(10))
        .build()?;
    let c = conn.clone();
    agent.subscribe(move |change| {
        if let Err(e) = forward(&c, change) {
            log::warn!("D-Bus signal not sent: {e}");
        }
    });
    Ok(conn)
}

fn forward(conn: &Connection, change: Change) -> zbus::Result<()> {
    let (Change::Status(i) | Change::Revoked(i, _)) = change;
    let iface = conn
        .object_server()
        .interface::<_, card_1::Card>(card_path(i as u32))?;
    let emitter = iface.signal_emitter();
    let card = iface.get();
    zbus::block_on(async {
        match change {
            Change::Revoked(_, why) => card_1::Card::revoked(emitter, why).await,
            Change::Status(_) => {
                let s = card
                    .agent
                    .status(i as u32)
                    .map_err(|e| zbus::Error::Failure(e.to_string()))?;
                card.stage_changed(emitter).await?;
                card.failed_stage_changed(emitter).await?;
                card.message_changed(emitter).await?;
                card.design_changed(emitter).await?;
                card.design_version_changed(emitter).await?;
                card.healthy_changed(emitter).await?;
                card.health_changed(emitter).await?;
                card.last_self_test_changed(emitter).await?;
                card.fell_back_to_golden_changed(emitter).await?;
                card_1::Card::state_changed(emitter, s.stage.name(), &s.message).await
            }
        }
    })
}

/// Whether the bus connection is up and the object server answers: a `Peer.Ping` to the agent itself goes
/// through the bus daemon and the connection's executor, which serves every method. Bounded by the
/// connection's method timeout.
pub fn alive(conn: &Connection) -> Result<(), String> {
    let me = conn
        .unique_name()
        .ok_or("no unique name on the bus")?
        .to_owned();
    conn.call_method(
        Some(me),
        MANAGER_PATH,
        Some("org.freedesktop.DBus.Peer"),
        "Ping",
        &(),
    )
    .map(drop)
    .map_err(|e| format!("the agent does not answer on the bus: {e}"))
}
