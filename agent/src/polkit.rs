//! Who may administer the cards. Where the box has polkit (`org.freedesktop.PolicyKit1` owned or
//! activatable on the system bus) it decides, per action (`org.gdr.agent.*`, shipped in
//! `deploy/org.gdr.agent.policy`), as systemd's own services ask it (polkit itself always authorizes root).
//! Where it has none, the `[admin]` table of the config decides. The decision itself is [`decide`]; the
//! bus calls around it are [`authorize`].

use std::collections::HashMap;

use zbus::message::{Flags, Header};
use zbus::zvariant::Value;

use crate::access::{Caller, NotAllowed};
use crate::config::Admin;

/// polkit's bus name.
pub const POLKIT: &str = "org.freedesktop.PolicyKit1";

/// The administration members, one polkit action each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdminAction {
    SelfTest,
    Bench,
    SetLeds,
    Reprogram,
    Reload,
}

impl AdminAction {
    pub const ALL: [AdminAction; 5] = [
        AdminAction::SelfTest,
        AdminAction::Bench,
        AdminAction::SetLeds,
        AdminAction::Reprogram,
        AdminAction::Reload,
    ];

    /// The D-Bus member this action guards.
    pub fn member(self) -> &'static str {
        match self {
            AdminAction::SelfTest => "SelfTest",
            AdminAction::Bench => "Bench",
            AdminAction::SetLeds => "SetLeds",
            AdminAction::Reprogram => "Reprogram",
            AdminAction::Reload => "Reload",
        }
    }

    pub fn of_member(member: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.member() == member)
    }

    /// The polkit action id.
    pub fn id(self) -> &'static str {
        match self {
            AdminAction::SelfTest => "org.gdr.agent.self-test",
            AdminAction::Bench => "org.gdr.agent.bench",
            AdminAction::SetLeds => "org.gdr.agent.set-leds",
            AdminAction::Reprogram => "org.gdr.agent.reprogram",
            AdminAction::Reload => "org.gdr.agent.reload",
        }
    }
}

/// polkit's answer to one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Authorized,
    /// Allowed after authentication, which the caller did not allow to be asked for.
    Challenge,
    Denied,
}

/// Why polkit gave no verdict.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PolkitError {
    /// Whether polkit is on the bus could not be asked.
    #[error("cannot tell whether the box has polkit: {0}")]
    Presence(#[source] zbus::Error),
    /// `CheckAuthorization` failed or answered something else than its signature.
    #[error("{0}")]
    Check(#[source] zbus::Error),
}

/// Why an administration call is refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Refusal {
    #[error("'{0}' is no administration member")]
    NotAdministration(String),
    #[error("polkit does not authorize {0}")]
    Denied(&'static str),
    #[error(
        "polkit wants authentication for {0}: call again allowing interactive authorization \
         (gdrctl under pkttyagent)"
    )]
    Challenge(&'static str),
    #[error("polkit did not answer for {0}: {1}")]
    NoAnswer(&'static str, #[source] PolkitError),
    /// `[admin]` (no polkit on the box) does not name the caller.
    #[error(transparent)]
    Config(#[from] NotAllowed),
}

/// The decision on `action`: `polkit` is `None` where the box has no polkit, else its answer
/// (or why it gave none: then the call is refused, never waved through); `config` is the `[admin]` check.
pub fn decide(
    action: AdminAction,
    polkit: Option<Result<Verdict, PolkitError>>,
    config: impl FnOnce() -> Result<(), NotAllowed>,
) -> Result<(), Refusal> {
    let id = action.id();
    match polkit {
        None => config().map_err(Refusal::Config),
        Some(Ok(Verdict::Authorized)) => Ok(()),
        Some(Ok(Verdict::Challenge)) => Err(Refusal::Challenge(id)),
        Some(Ok(Verdict::Denied)) => Err(Refusal::Denied(id)),
        Some(Err(e)) => Err(Refusal::NoAnswer(id, e)),
    }
}

/// Whether polkit is on this bus (running, or started on demand).
pub async fn present(conn: &zbus::Connection) -> zbus::Result<bool> {
    let dbus = zbus::fdo::DBusProxy::new(conn).await?;
    let name = zbus::names::BusName::try_from(POLKIT)?;
    if dbus.name_has_owner(name).await? {
        return Ok(true);
    }
    Ok(dbus
        .list_activatable_names()
        .await?
        .iter()
        .any(|n| n.as_str() == POLKIT))
}

/// Asks polkit whether the bus client `sender` may do `action`.
pub async fn check(
    conn: &zbus::Connection,
    sender: &str,
    action: AdminAction,
    interactive: bool,
) -> Result<Verdict, PolkitError> {
    let subject: (&str, HashMap<&str, Value<'_>>) = (
        "system-bus-name",
        HashMap::from([("name", Value::from(sender))]),
    );
    let details: HashMap<&str, &str> = HashMap::new();
    let flags = u32::from(interactive); // AllowUserInteraction
    let reply = conn
        .call_method(
            Some(POLKIT),
            "/org/freedesktop/PolicyKit1/Authority",
            Some("org.freedesktop.PolicyKit1.Authority"),
            "CheckAuthorization",
            &(subject, action.id(), details, flags, ""),
        )
        .await
        .map_err(PolkitError::Check)?;
    let (authorized, challenge, _): (bool, bool, HashMap<String, String>) =
        reply.body().deserialize().map_err(PolkitError::Check)?;
    Ok(match (authorized, challenge) {
        (true, _) => Verdict::Authorized,
        (false, true) => Verdict::Challenge,
        (false, false) => Verdict::Denied,
    })
}

/// Authorizes the administration call `hdr` of `caller` (credentials from the bus): polkit where the box
/// has it, else `admin`.
pub async fn authorize(
    conn: &zbus::Connection,
    hdr: &Header<'_>,
    caller: &Caller,
    admin: &Admin,
) -> Result<(), Refusal> {
    let member = hdr.member().map(|m| m.as_str()).unwrap_or("");
    let action = AdminAction::of_member(member)
        .ok_or_else(|| Refusal::NotAdministration(member.to_string()))?;
    let polkit = match present(conn).await {
        Ok(false) => None,
        Ok(true) => {
            let sender = hdr.sender().map(|s| s.as_str()).unwrap_or("");
            let interactive = hdr.primary().flags().contains(Flags::AllowInteractiveAuth);
            Some(check(conn, sender, action, interactive).await)
        }
        Err(e) => Some(Err(PolkitError::Presence(e))),
    };
    decide(action, polkit, || {
        crate::access::check_admin(admin, caller.uid, &caller.gids)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polkit_decides_where_present_the_config_where_not() {
        let a = AdminAction::Reprogram;
        let yes = || Ok(());
        let stranger = NotAllowed {
            who: "alice".into(),
            table: "[admin]",
            users: vec!["root".into()],
            groups: vec![],
        };
        let no = || Err(stranger.clone());
        // No polkit: [admin] alone, root included.
        assert!(decide(a, None, yes).is_ok());
        assert_eq!(
            decide(a, None, no).unwrap_err(),
            Refusal::Config(stranger.clone())
        );
        // polkit: its answer, whatever [admin] says.
        assert!(decide(a, Some(Ok(Verdict::Authorized)), no).is_ok());
        let e = decide(a, Some(Ok(Verdict::Denied)), yes).unwrap_err();
        assert_eq!(
            e.to_string(),
            "polkit does not authorize org.gdr.agent.reprogram"
        );
        let e = decide(a, Some(Ok(Verdict::Challenge)), yes).unwrap_err();
        assert!(e.to_string().contains("interactive authorization"), "{e}");
        // A polkit that does not answer refuses (never falls back to a laxer rule).
        let timeout = PolkitError::Check(zbus::Error::Failure("timeout".into()));
        let e = decide(a, Some(Err(timeout)), yes).unwrap_err();
        assert!(matches!(e, Refusal::NoAnswer(..)), "{e}");
        assert_eq!(
            e.to_string(),
            "polkit did not answer for org.gdr.agent.reprogram: timeout"
        );
    }

    #[test]
    fn every_member_has_its_action() {
        for a in AdminAction::ALL {
            assert_eq!(AdminAction::of_member(a.member()), Some(a));
            assert!(a.id().starts_with("org.gdr.agent."));
        }
        assert_eq!(AdminAction::of_member("Open"), None);
    }
}
