//! A body sent by another server (a model's answer, a validator's), read piece by piece without
//! ever holding more of it than a limit: the one way the adapters bound what they read. The
//! reading itself (sockets, chunks) is the adapter's; this is the bound.

/// What to do with a body longer than the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Past {
    /// Refuse it: reading stops at the limit and the body is [`TooLarge`].
    Refuse,
    /// Keep its start, up to the limit, and read no further (an error answer's summary needs
    /// no more).
    Cut,
}

/// A body larger than the limit it was read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the body is larger than the limit of {limit} bytes")]
pub struct TooLarge {
    pub limit: usize,
}

/// A body being read with a limit.
#[derive(Debug)]
pub struct BoundedBody {
    bytes: Vec<u8>,
    limit: usize,
    past: Past,
}

impl BoundedBody {
    /// Begin reading a body whose length the server `announced` (`Content-Length`), if it did:
    /// with [`Past::Refuse`], an announced length over `limit` is refused before anything is
    /// read.
    pub fn new(limit: usize, announced: Option<u64>, past: Past) -> Result<Self, TooLarge> {
        let announced = announced.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        if past == Past::Refuse && announced.is_some_and(|n| n > limit) {
            return Err(TooLarge { limit });
        }
        Ok(Self { bytes: Vec::with_capacity(announced.unwrap_or(0).min(limit)), limit, past })
    }

    /// Take the next piece of the body: `Ok(true)` to read on, `Ok(false)` when the body was cut
    /// at the limit ([`Past::Cut`]) and nothing more is wanted; past the limit with
    /// [`Past::Refuse`], [`TooLarge`] (and what was read is dropped with this value).
    pub fn push(&mut self, chunk: &[u8]) -> Result<bool, TooLarge> {
        let room = self.limit.saturating_sub(self.bytes.len());
        if chunk.len() <= room {
            self.bytes.extend_from_slice(chunk);
            return Ok(true);
        }
        match self.past {
            Past::Cut => {
                self.bytes.extend_from_slice(chunk.get(..room).unwrap_or_default());
                Ok(false)
            }
            Past::Refuse => Err(TooLarge { limit: self.limit }),
        }
    }

    /// The body read.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announced_length_over_the_limit_is_refused_before_reading() {
        assert_eq!(BoundedBody::new(10, Some(11), Past::Refuse).err(), Some(TooLarge { limit: 10 }));
        assert!(BoundedBody::new(10, Some(10), Past::Refuse).is_ok());
        assert!(BoundedBody::new(10, Some(11), Past::Cut).is_ok(), "an error answer's start is still read");
    }

    #[test]
    fn reading_stops_at_the_limit() {
        let mut body = BoundedBody::new(10, None, Past::Refuse).unwrap();
        assert_eq!(body.push(b"12345"), Ok(true));
        assert_eq!(body.push(b"67890"), Ok(true));
        assert_eq!(body.push(b"1"), Err(TooLarge { limit: 10 }));

        let mut body = BoundedBody::new(10, None, Past::Cut).unwrap();
        assert_eq!(body.push(b"12345678"), Ok(true));
        assert_eq!(body.push(b"9abc"), Ok(false));
        assert_eq!(body.into_bytes(), b"123456789a");
    }
}
