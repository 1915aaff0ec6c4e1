//! The live view of `pipetrace run` on a terminal: a few lines at the bottom of the screen,
//! kept out of the command's way by a scrolling region above them (as apt draws its
//! progress), so the command's output scrolls above and is never drawn over. Each update is
//! one write, which the terminal takes whole between the command's own writes. Not on a
//! terminal, nothing is drawn.
use std::io::{IsTerminal, Write};

use crossterm::{
    Command, QueueableCommand,
    cursor::{MoveTo, MoveUp, RestorePosition, SavePosition},
    terminal::{self, Clear, ClearType},
};

/// DECSTBM, the scrolling region (crossterm has no command of its own for it).
struct ScrollRegion(Option<(u16, u16)>);

impl Command for ScrollRegion {
    fn write_ansi(&self, f: &mut impl std::fmt::Write) -> std::fmt::Result {
        match self.0 {
            Some((top, bottom)) => write!(f, "\x1b[{top};{bottom}r"),
            None => f.write_str("\x1b[r"),
        }
    }
}

/// The lines kept at the bottom of the terminal.
pub struct StatusArea {
    height: u16,
    size: (u16, u16),
}

impl StatusArea {
    /// `height` lines at the bottom of stderr's terminal, if stderr is one big enough.
    pub(crate) fn open(height: u16) -> Option<Self> {
        let err = std::io::stderr();
        if !err.is_terminal() || std::env::var("TERM").is_ok_and(|t| t == "dumb") {
            return None;
        }
        let size = terminal::size().ok()?;
        if size.1 < height * 3 || size.0 < 40 {
            return None;
        }
        let area = Self { height, size };
        let mut buf = Vec::new();
        // Room below the cursor: the screen scrolls up by the area's height.
        buf.extend(std::iter::repeat_n(b'\n', usize::from(height)));
        let _ = buf.queue(MoveUp(height));
        area.set_region(&mut buf);
        let _ = err.lock().write_all(&buf);
        Some(area)
    }

    fn set_region(&self, buf: &mut Vec<u8>) {
        let _ = buf.queue(SavePosition);
        let _ = buf.queue(ScrollRegion(Some((1, self.size.1 - self.height))));
        let _ = buf.queue(RestorePosition);
    }

    /// Draws `lines` (cut to the area) in one write, the cursor left where it was.
    pub(crate) fn draw(&mut self, lines: &[String]) {
        let mut buf = Vec::new();
        if let Ok(size) = terminal::size()
            && size != self.size
            && size.1 >= self.height * 3
        {
            self.size = size;
            self.set_region(&mut buf);
        }
        let _ = buf.queue(SavePosition);
        let top = self.size.1 - self.height;
        for row in 0..self.height {
            let _ = buf.queue(MoveTo(0, top + row));
            let _ = buf.queue(Clear(ClearType::CurrentLine));
            if let Some(l) = lines.get(usize::from(row)) {
                let cut: String = l.chars().take(usize::from(self.size.0) - 1).collect();
                buf.extend_from_slice(cut.as_bytes());
            }
        }
        let _ = buf.queue(RestorePosition);
        let _ = std::io::stderr().lock().write_all(&buf);
    }

    /// The whole screen scrolls again and the area is cleared.
    fn close(&mut self) {
        let mut buf = Vec::new();
        let _ = buf.queue(SavePosition);
        let _ = buf.queue(ScrollRegion(None));
        let top = self.size.1 - self.height;
        for row in 0..self.height {
            let _ = buf.queue(MoveTo(0, top + row));
            let _ = buf.queue(Clear(ClearType::CurrentLine));
        }
        let _ = buf.queue(RestorePosition);
        let _ = std::io::stderr().lock().write_all(&buf);
    }
}

impl Drop for StatusArea {
    fn drop(&mut self) {
        self.close();
    }
}
