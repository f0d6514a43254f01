//! The D-Bus face of the agent (zbus): it only adapts [`crate::daemon::Agent`]. One file per interface
//! and version (`manager_2`, `card_2`: version 2, typed; version 1 returned JSON in strings and is gone);
//! a later, incompatible version gets a new interface name and new files, and errors are mapped in one
//! place (`errors`). The values it returns are `gdr_client::api`'s types, which the client's proxies read;
//! the agent's own types become them in one place (`wire`).

pub mod card_2;
pub mod errors;
pub mod manager_2;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gdr_client::{BUS_NAME, MANAGER_PATH, card_path};
use zbus::blocking::Connection;
use zbus::names::InterfaceName;
use zbus::zvariant::{OwnedValue, Value};

use crate::daemon::{Agent, Change};

/// Connects (system bus, or `address`), serves every object, takes the well-known name and forwards the
/// agent's changes as signals.
pub fn serve(agent: &Arc<Agent>, address: Option<&str>) -> zbus::Result<Connection> {
    // What the properties read before anyone can ask (the name is not taken yet): PropertiesChanged then
    // carries what differs from the last sent.
    let sent = Arc::new(Mutex::new(Sent {
        cards: agent.statuses().iter().map(card_2::signalled).collect(),
        status: agent.status_text(),
    }));
    let mut b = match address {
        Some(a) => zbus::blocking::connection::Builder::address(a)?,
        None => zbus::blocking::connection::Builder::system()?,
    };
    b = b.serve_at(
        MANAGER_PATH,
        manager_2::Manager {
            agent: agent.clone(),
        },
    )?;
    for i in 0..agent.card_count() as u32 {
        b = b.serve_at(
            card_path(i),
            card_2::Card {
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
    let (c, a, s) = (conn.clone(), Arc::downgrade(agent), sent.clone());
    agent.subscribe(move |change| {
        let Some(a) = a.upgrade() else { return };
        if let Err(e) = forward(&c, &a, &s, change) {
            log::warn!("D-Bus signal not sent: {e}");
        }
    });
    // A change between the first snapshot and the subscription is sent now.
    for i in 0..agent.card_count() {
        if let Err(e) = forward(&conn, agent, &sent, Change::Status(i)) {
            log::warn!("D-Bus signal not sent: {e}");
        }
    }
    Ok(conn)
}

/// The property values last signalled (per card, and the manager's Status).
struct Sent {
    cards: Vec<Vec<(&'static str, OwnedValue)>>,
    status: String,
}

/// The entries of `now` that differ from `before` (same names, same order: both come from
/// `card_2::signalled`).
fn differences<'a>(
    before: &[(&'static str, OwnedValue)],
    now: &'a [(&'static str, OwnedValue)],
) -> HashMap<&'static str, &'a OwnedValue> {
    now.iter()
        .zip(before)
        .filter(|(n, b)| n.1 != b.1)
        .map(|(n, _)| (n.0, &n.1))
        .collect()
}

/// Sends what changed: Revoked, or PropertiesChanged for every card property (and the manager's Status)
/// that differs from what was last sent, and StateChanged when the stage or message did. Serialized by
/// `sent`, and each send reads the status afresh, so the last signal always tells the current values.
fn forward(
    conn: &Connection,
    agent: &Agent,
    sent: &Mutex<Sent>,
    change: Change,
) -> zbus::Result<()> {
    let (Change::Status(i) | Change::Revoked(i, _)) = change;
    let iface = conn
        .object_server()
        .interface::<_, card_2::Card>(card_path(i as u32))?;
    let emitter = iface.signal_emitter();
    if let Change::Revoked(_, why) = change {
        return zbus::block_on(card_2::Card::revoked(emitter, why));
    }
    // Held while sending (each send blocks on its own), so the signals leave in the order of the states.
    let mut sent = sent.lock().unwrap_or_else(|e| e.into_inner());
    let s = agent
        .status(i as u32)
        .map_err(|e| zbus::Error::Failure(e.to_string()))?;
    let now = card_2::signalled(&s);
    let changed = differences(&sent.cards[i], &now);
    if !changed.is_empty() {
        let state = changed.contains_key("Stage") || changed.contains_key("Message");
        let values = changed
            .iter()
            .map(|(k, v)| Ok((*k, Value::from(v.try_clone()?))))
            .collect::<zbus::zvariant::Result<HashMap<_, _>>>()?;
        zbus::block_on(zbus::fdo::Properties::properties_changed(
            emitter,
            InterfaceName::from_static_str_unchecked(gdr_client::CARD_IFACE),
            values,
            Default::default(),
        ))?;
        if state {
            zbus::block_on(card_2::Card::state_changed(
                emitter,
                s.stage.name(),
                &s.message,
            ))?;
        }
        sent.cards[i] = now;
    }
    let status = agent.status_text();
    if status != sent.status {
        let m = conn
            .object_server()
            .interface::<_, manager_2::Manager>(MANAGER_PATH)?;
        zbus::block_on(m.get().status_changed(m.signal_emitter()))?;
        sent.status = status;
    }
    Ok(())
}

/// Whether the bus connection is up and the object server answers: a `Peer.Ping` to the agent itself goes
/// through the bus daemon and the connection's executor, which serves every method. Bounded by the
/// connection's method timeout.
pub fn alive(conn: &Connection) -> Result<(), Unreachable> {
    let me = conn.unique_name().ok_or(Unreachable::NoName)?.to_owned();
    conn.call_method(
        Some(me),
        MANAGER_PATH,
        Some("org.freedesktop.DBus.Peer"),
        "Ping",
        &(),
    )
    .map(drop)
    .map_err(Unreachable::NoAnswer)
}

/// Why the agent cannot reach itself on the bus.
#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    #[error("no unique name on the bus")]
    NoName,
    #[error("the agent does not answer on the bus: {0}")]
    NoAnswer(#[source] zbus::Error),
}
