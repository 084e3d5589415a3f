//! Who may use the console: one-time sign-in tickets (minted over the API,
//! which `jig console` does on the Unix socket), sessions held in memory
//! behind an HttpOnly, SameSite=Strict cookie, and each session's CSRF
//! token. Nothing here widens access: a ticket is minted only by a client
//! the API already trusts, and a TCP sign-in takes the same bearer token
//! the API does.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::serve::token::same;
use crate::Error;

/// How long a sign-in ticket may wait to be used (once).
pub const TICKET_TTL: Duration = Duration::from_secs(300);
/// How long a session lasts from sign-in.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Unused tickets held at once; past it the oldest is dropped.
pub const MAX_TICKETS: usize = 64;
/// Sessions held at once; past it the oldest is dropped.
pub const MAX_SESSIONS: usize = 256;
/// The session cookie's name.
pub const COOKIE: &str = "jig_console";

/// One signed-in browser.
#[derive(Clone)]
pub struct Session {
    pub csrf: String,
    expires: Instant,
}

/// The daemon's console sign-ins, shared by its listeners.
#[derive(Default)]
pub struct Console {
    tickets: Mutex<HashMap<String, Instant>>,
    sessions: Mutex<HashMap<String, Session>>,
}

/// 32 random bytes from the kernel (getrandom(2), no file descriptor to
/// run out of or a chroot to lack), hex.
fn random_token() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Internal(format!("no randomness for a console token: {e}")))?;
    Ok(flow::digest::hex(&bytes))
}

fn drop_oldest<V>(map: &mut HashMap<String, V>, max: usize, expires: impl Fn(&V) -> Instant) {
    let now = Instant::now();
    map.retain(|_, v| expires(v) > now);
    while map.len() >= max {
        let Some(oldest) = map
            .iter()
            .min_by_key(|(_, v)| expires(v))
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        map.remove(&oldest);
    }
}

impl Console {
    /// A one-time sign-in ticket, valid for [`TICKET_TTL`].
    pub fn mint_ticket(&self) -> Result<String, Error> {
        let ticket = random_token()?;
        let mut tickets = self.tickets.lock().unwrap();
        drop_oldest(&mut tickets, MAX_TICKETS, |t| *t);
        tickets.insert(ticket.clone(), Instant::now() + TICKET_TTL);
        Ok(ticket)
    }

    /// Spend `ticket` (once) for a new session id.
    pub fn redeem(&self, ticket: &str) -> Result<String, Error> {
        let spent = {
            let mut tickets = self.tickets.lock().unwrap();
            let found = tickets
                .keys()
                .find(|k| same(k.as_bytes(), ticket.as_bytes()))
                .cloned();
            found.and_then(|k| tickets.remove(&k))
        };
        match spent {
            Some(expires) if expires > Instant::now() => self.open_session(),
            _ => Err(Error::Unauthenticated(
                "this sign-in link is spent, expired or wrong; run jig console again".into(),
            )),
        }
    }

    /// A new session id (the cookie's value).
    pub fn open_session(&self) -> Result<String, Error> {
        let id = random_token()?;
        let session = Session {
            csrf: random_token()?,
            expires: Instant::now() + SESSION_TTL,
        };
        let mut sessions = self.sessions.lock().unwrap();
        drop_oldest(&mut sessions, MAX_SESSIONS, |s| s.expires);
        sessions.insert(id.clone(), session);
        Ok(id)
    }

    /// The live session a `Cookie` header names, if any.
    pub fn session(&self, cookie_header: Option<&str>) -> Option<Session> {
        let id = cookie_header?
            .split(';')
            .filter_map(|c| c.trim().split_once('='))
            .find(|(name, _)| *name == COOKIE)
            .map(|(_, value)| value)?;
        let sessions = self.sessions.lock().unwrap();
        let (_, session) = sessions
            .iter()
            .find(|(k, _)| same(k.as_bytes(), id.as_bytes()))?;
        (session.expires > Instant::now()).then(|| session.clone())
    }

    /// End the session a `Cookie` header names.
    pub fn close(&self, cookie_header: Option<&str>) {
        let Some(header) = cookie_header else { return };
        let mut sessions = self.sessions.lock().unwrap();
        for (name, value) in header.split(';').filter_map(|c| c.trim().split_once('=')) {
            if name == COOKIE {
                sessions.remove(value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_signs_in_once_and_the_cookie_names_the_session() {
        let console = Console::default();
        let ticket = console.mint_ticket().unwrap();
        let id = console.redeem(&ticket).unwrap();
        assert_eq!(
            console.redeem(&ticket).unwrap_err().code(),
            "UNAUTHENTICATED"
        );
        assert_eq!(
            console.redeem("nope").unwrap_err().code(),
            "UNAUTHENTICATED"
        );
        let cookie = format!("a=b; {COOKIE}={id}");
        let session = console.session(Some(&cookie)).unwrap();
        assert_eq!(session.csrf.len(), 64);
        assert!(console.session(Some("jig_console=x")).is_none());
        assert!(console.session(None).is_none());
        console.close(Some(&cookie));
        assert!(console.session(Some(&cookie)).is_none());
    }

    /// `ticket` with its last byte changed.
    fn one_byte_off(ticket: &str) -> String {
        let mut bytes = ticket.as_bytes().to_vec();
        let last = bytes.last_mut().unwrap();
        *last = if *last == b'0' { b'1' } else { b'0' };
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_ticket_or_session_one_byte_off_or_of_another_length_is_refused() {
        let console = Console::default();
        let ticket = console.mint_ticket().unwrap();
        let near = [
            one_byte_off(&ticket),
            ticket[..ticket.len() - 1].to_string(),
            format!("{ticket}0"),
            String::new(),
        ];
        for wrong in &near {
            assert_eq!(
                console.redeem(wrong).unwrap_err().code(),
                "UNAUTHENTICATED",
                "{wrong}"
            );
        }
        let id = console.redeem(&ticket).unwrap();
        for wrong in [one_byte_off(&id), id[1..].to_string(), format!("{id}0")] {
            assert!(console
                .session(Some(&format!("{COOKIE}={wrong}")))
                .is_none());
        }
        assert!(console.session(Some(&format!("{COOKIE}={id}"))).is_some());
    }

    #[test]
    fn tokens_are_distinct_hex() {
        let a = random_token().unwrap();
        let b = random_token().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn tickets_and_sessions_are_bounded() {
        let console = Console::default();
        // At the bound every ticket is held; one past it, the oldest goes.
        let first = console.mint_ticket().unwrap();
        for _ in 1..MAX_TICKETS {
            console.mint_ticket().unwrap();
        }
        assert_eq!(console.tickets.lock().unwrap().len(), MAX_TICKETS);
        console.mint_ticket().unwrap();
        assert_eq!(console.tickets.lock().unwrap().len(), MAX_TICKETS);
        assert!(console.redeem(&first).is_err(), "the oldest ticket went");
        for _ in 0..MAX_SESSIONS {
            console.open_session().unwrap();
        }
        assert_eq!(console.sessions.lock().unwrap().len(), MAX_SESSIONS);
        console.open_session().unwrap();
        assert_eq!(console.sessions.lock().unwrap().len(), MAX_SESSIONS);
    }
}
