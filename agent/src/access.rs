//! Who may have a card's fd: the caller's uid and groups (from the bus, as logind's TakeDevice checks
//! them) against `[access] users` and `groups` of the config. Names are resolved at every check, so a
//! group added later counts without a restart.

use std::ffi::{CStr, CString};

use crate::config::{Access, Admin};

/// Who calls, as the bus daemon reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub gids: Vec<u32>,
    /// Absent where the bus does not say.
    pub pid: Option<u32>,
}

/// The uid of user `name`, if it exists.
pub fn uid_of(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    let mut pwd: libc::passwd = unsafe_zeroed();
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut out = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; `buf` is the scratch space getpwnam_r requires.
    let rc =
        unsafe { libc::getpwnam_r(c.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out) };
    (rc == 0 && !out.is_null()).then_some(pwd.pw_uid)
}

fn gid_of(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    let mut grp: libc::group = unsafe_zeroed();
    let mut buf = vec![0 as libc::c_char; 65536];
    let mut out = std::ptr::null_mut();
    // SAFETY: as for getpwnam_r.
    let rc =
        unsafe { libc::getgrnam_r(c.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut out) };
    (rc == 0 && !out.is_null()).then_some(grp.gr_gid)
}

/// The user name of `uid`, for messages.
pub fn user_name(uid: u32) -> String {
    let mut pwd: libc::passwd = unsafe_zeroed();
    let mut buf = vec![0 as libc::c_char; 16384];
    let mut out = std::ptr::null_mut();
    // SAFETY: as for getpwnam_r.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc == 0 && !out.is_null() {
        // SAFETY: on success pw_name points into `buf`, NUL-terminated.
        return unsafe { CStr::from_ptr(pwd.pw_name) }
            .to_string_lossy()
            .into_owned();
    }
    format!("uid {uid}")
}

fn unsafe_zeroed<T>() -> T {
    // SAFETY: only used for passwd/group, plain C structs for which all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// A caller the config does not name.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{who} is not in {table} users ({}) nor in any of its groups ({})",
    users.join(", "),
    groups.join(", ")
)]
pub struct NotAllowed {
    pub who: String,
    pub table: &'static str,
    pub users: Vec<String>,
    pub groups: Vec<String>,
}

/// Ok if `uid` or one of `gids` is allowed to Open (`[access]`); else why not.
pub fn check(access: &Access, uid: u32, gids: &[u32]) -> Result<(), NotAllowed> {
    check_in("[access]", &access.users, &access.groups, uid, gids)
}

/// Ok if `uid` or one of `gids` may administer the cards (`[admin]`); else why not.
pub fn check_admin(admin: &Admin, uid: u32, gids: &[u32]) -> Result<(), NotAllowed> {
    check_in("[admin]", &admin.users, &admin.groups, uid, gids)
}

fn check_in(
    table: &'static str,
    users: &[String],
    groups: &[String],
    uid: u32,
    gids: &[u32],
) -> Result<(), NotAllowed> {
    if users
        .iter()
        .any(|u| uid_of(u) == Some(uid) || u.parse() == Ok(uid))
    {
        return Ok(());
    }
    if groups
        .iter()
        .filter_map(|g| gid_of(g).or_else(|| g.parse().ok()))
        .any(|g| gids.contains(&g))
    {
        return Ok(());
    }
    Err(NotAllowed {
        who: user_name(uid),
        table,
        users: users.to_vec(),
        groups: groups.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_groups_and_strangers() {
        let a = Access {
            users: vec!["root".into()],
            groups: vec!["4242".into()],
        };
        assert!(check(&a, 0, &[]).is_ok(), "root by name");
        assert!(check(&a, 54321, &[7, 4242]).is_ok(), "by a numeric group");
        let e = check(&a, 54321, &[7]).unwrap_err();
        assert!(
            e.to_string()
                .contains("uid 54321 is not in [access] users (root)"),
            "{e}"
        );
        let none = Access {
            users: vec![],
            groups: vec!["no-such-group-gdr".into()],
        };
        assert!(
            check(&none, 0, &[0]).is_err(),
            "an unknown group matches nobody"
        );
    }
}
