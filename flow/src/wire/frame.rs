//! Frames: LF-terminated JSON/1 documents of at most [`MAX_FRAME_BYTES`].

use std::io::Read;

use serde_json::Value;

use super::MAX_FRAME_BYTES;

/// Parses one frame payload as a JSON/1 value.
pub(super) fn parse_json(bytes: &[u8]) -> Result<Value, String> {
    crate::json::parse(bytes).map_err(|e| e.to_string())
}

/// Why a byte stream stopped yielding frames. Every variant is fatal to the
/// channel. Only [`FrameError::Empty`] is answered, by the peer that reads
/// it: a complete, valid-UTF-8 frame that fails JSON/1 gets a best-effort
/// `-32700` with id null (Run/1 §1); the others close silently.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// An LF with no bytes before it.
    #[error("empty frame")]
    Empty,
    /// More than [`MAX_FRAME_BYTES`] bytes without an LF.
    #[error("frame exceeds {MAX_FRAME_BYTES} bytes")]
    Oversized,
    /// EOF after nonempty bytes without an LF.
    #[error("incomplete frame at end of stream")]
    Incomplete,
    /// The underlying read failed.
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Splits a byte stream into LF-terminated frames, enforcing the frame bound.
///
/// Feed bytes with [`FrameDecoder::push`], take frames with
/// [`FrameDecoder::next_frame`] until it returns `Ok(None)`, and call
/// [`FrameDecoder::finish`] at end of stream.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already known to contain no LF.
    scanned: usize,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered but not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame payload (without its LF), if one is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        match self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
            Some(offset) => {
                let end = self.scanned + offset;
                if end == 0 {
                    return Err(FrameError::Empty);
                }
                if end > MAX_FRAME_BYTES {
                    return Err(FrameError::Oversized);
                }
                let rest = self.buf.split_off(end + 1);
                let mut frame = std::mem::replace(&mut self.buf, rest);
                frame.pop();
                self.scanned = 0;
                Ok(Some(frame))
            }
            None => {
                self.scanned = self.buf.len();
                if self.buf.len() > MAX_FRAME_BYTES {
                    return Err(FrameError::Oversized);
                }
                Ok(None)
            }
        }
    }

    /// Checks the stream ended on a frame boundary.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(FrameError::Incomplete)
        }
    }
}

/// Reads frames from a blocking byte source.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    decoder: FrameDecoder,
    chunk: Box<[u8]>,
    done: bool,
}

pub(super) const READ_CHUNK: usize = 64 * 1024;

impl<R: Read> FrameReader<R> {
    /// Wraps a reader.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            decoder: FrameDecoder::new(),
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
            done: false,
        }
    }

    /// The next frame payload, or `Ok(None)` at a clean end of stream.
    pub fn read_frame(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            if let Some(frame) = self.decoder.next_frame()? {
                return Ok(Some(frame));
            }
            if self.done {
                self.decoder.finish()?;
                return Ok(None);
            }
            let n = loop {
                match self.inner.read(&mut self.chunk) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(FrameError::Io(e)),
                }
            };
            if n == 0 {
                self.done = true;
            } else {
                self.decoder.push(&self.chunk[..n]);
            }
        }
    }
}
