//! A bounded in-memory stdout/stderr for guests that keeps the newest bytes.
//!
//! wasmtime-wasi's `MemoryOutputPipe` refuses writes past its capacity, which makes a
//! chatty guest fail (its `println!` panics) and loses the panic message that a guest
//! writes last. This pipe accepts every write and keeps only the tail.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Output kept per stream and call: enough for a panic message and the lines before it.
pub(super) const TAIL_CAPACITY: usize = 16 * 1024;

/// A clonable handle on one captured stream; all clones share the buffer.
#[derive(Clone, Debug, Default)]
pub(super) struct TailPipe {
    buffer: Arc<Mutex<Tail>>,
}

#[derive(Debug, Default)]
struct Tail {
    bytes: VecDeque<u8>,
    /// Bytes dropped from the front to stay within [`TAIL_CAPACITY`].
    dropped: usize,
}

impl TailPipe {
    fn lock(&self) -> MutexGuard<'_, Tail> {
        // A panic while holding this lock can only come from a push into a VecDeque; the
        // buffer stays consistent, so a poisoned lock is still usable.
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, data: &[u8]) {
        let mut tail = self.lock();
        let data = if data.len() > TAIL_CAPACITY {
            tail.dropped += data.len() - TAIL_CAPACITY;
            &data[data.len() - TAIL_CAPACITY..]
        } else {
            data
        };
        let overflow = (tail.bytes.len() + data.len()).saturating_sub(TAIL_CAPACITY);
        tail.bytes.drain(..overflow);
        tail.dropped += overflow;
        tail.bytes.extend(data);
    }

    /// What the guest wrote (its newest [`TAIL_CAPACITY`] bytes, lossily decoded), and how
    /// many older bytes were dropped.
    pub(super) fn contents(&self) -> (String, usize) {
        let tail = self.lock();
        let (front, back) = tail.bytes.as_slices();
        let mut bytes = Vec::with_capacity(tail.bytes.len());
        bytes.extend_from_slice(front);
        bytes.extend_from_slice(back);
        (String::from_utf8_lossy(&bytes).into_owned(), tail.dropped)
    }
}

impl IsTerminal for TailPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for TailPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for TailPipe {
    /// Always writable: writes never block.
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for TailPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Any amount may be written; older bytes make room.
        Ok(TAIL_CAPACITY)
    }
}

impl AsyncWrite for TailPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_bytes() {
        let pipe = TailPipe::default();
        pipe.push(b"hello ");
        pipe.push(&vec![b'x'; TAIL_CAPACITY]);
        pipe.push(b"boom");
        let (text, dropped) = pipe.contents();
        assert_eq!(text.len(), TAIL_CAPACITY);
        assert!(text.ends_with("xboom"));
        assert_eq!(dropped, 6 + 4);
    }
}
