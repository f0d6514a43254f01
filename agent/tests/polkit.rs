//! Administration is decided by polkit where the bus has it and by `[admin]` where not: a real dbus-daemon,
//! a scripted polkit authority on it, and the agent's `polkit::authorize` behind a test object whose members
//! are named as the agent's administration members.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

mod common;

use common::start_bus;
use gdr_agent::access::Caller;
use gdr_agent::config::Admin;
use zbus::message::Header;
use zbus::zvariant::OwnedValue;

/// Calls seen by the scripted polkit: (subject name, action id).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// Authorizes `org.gdr.agent.reload` only.
struct Authority(Seen);

#[zbus::interface(name = "org.freedesktop.PolicyKit1.Authority")]
impl Authority {
    fn check_authorization(
        &self,
        subject: (String, HashMap<String, OwnedValue>),
        action_id: String,
        _details: HashMap<String, String>,
        _flags: u32,
        _cancellation_id: String,
    ) -> (bool, bool, HashMap<String, String>) {
        let name = subject
            .1
            .get("name")
            .and_then(|v| String::try_from(v.try_clone().unwrap()).ok())
            .unwrap_or_default();
        assert_eq!(subject.0, "system-bus-name");
        let ok = action_id == "org.gdr.agent.reload";
        self.0.lock().unwrap().push((name, action_id));
        (ok, false, HashMap::new())
    }
}

/// Members named as the agent's; each answers what `authorize` decided.
struct Admins(Admin);

impl Admins {
    async fn decide(&self, hdr: &Header<'_>, conn: &zbus::Connection) -> String {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let me = Caller {
            uid,
            ..Default::default()
        };
        match gdr_agent::polkit::authorize(conn, hdr, &me, &self.0).await {
            Ok(()) => "allowed".into(),
            Err(e) => e.to_string(),
        }
    }
}

#[zbus::interface(name = "org.gdr.Test.Admin")]
impl Admins {
    async fn reprogram(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> String {
        self.decide(&hdr, conn).await
    }

    async fn reload(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &zbus::Connection,
    ) -> String {
        self.decide(&hdr, conn).await
    }
}

fn call(conn: &zbus::blocking::Connection, member: &str) -> String {
    conn.call_method(
        Some("org.gdr.Test"),
        "/admin",
        Some("org.gdr.Test.Admin"),
        member,
        &(),
    )
    .unwrap()
    .body()
    .deserialize()
    .unwrap()
}

#[test]
fn polkit_decides_where_the_bus_has_it() {
    let Some(bus) = start_bus("polkit") else {
        return;
    };
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() }.to_string();
    let admin = Admin {
        users: vec![me],
        groups: vec![],
        ..Default::default()
    };
    let _server = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .serve_at("/admin", Admins(admin))
        .unwrap()
        .name("org.gdr.Test")
        .unwrap()
        .build()
        .unwrap();
    let client = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .build()
        .unwrap();

    // No polkit on this bus: [admin] (which names us) decides.
    assert_eq!(call(&client, "Reprogram"), "allowed");

    // polkit arrives: it decides, [admin] notwithstanding.
    let seen = Seen::default();
    let _polkit = zbus::blocking::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .serve_at(
            "/org/freedesktop/PolicyKit1/Authority",
            Authority(seen.clone()),
        )
        .unwrap()
        .name("org.freedesktop.PolicyKit1")
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(
        call(&client, "Reprogram"),
        "polkit does not authorize org.gdr.agent.reprogram"
    );
    assert_eq!(call(&client, "Reload"), "allowed");
    let me = client.unique_name().unwrap().to_string();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (me.clone(), "org.gdr.agent.reprogram".to_string()),
            (me, "org.gdr.agent.reload".to_string())
        ],
        "polkit was asked about the caller and the member's action"
    );
}
