//! What an engine's status word means for the caller.

use crate::errno::Errno;
use crate::xdma;

/// Bits that mean the engine rejected our descriptors: a driver bug or corrupted descriptor memory.
const PROTOCOL: u32 =
    xdma::STAT_MAGIC_STOPPED | xdma::STAT_INVALID_LENGTH | xdma::STAT_ALIGN_MISMATCH;
/// Bits that mean the bus or the card failed a read, write or descriptor fetch.
const BUS: u32 = xdma::STAT_READ_ERROR | xdma::STAT_WRITE_ERROR | xdma::STAT_DESC_ERROR;

/// Decodes the status (read-to-clear value) an engine ended a chain with: Ok only if it stopped at our STOP
/// descriptor with no error bit.
pub fn outcome(status: u32) -> Result<(), Errno> {
    if status & BUS != 0 {
        Err(Errno::EIO)
    } else if status & PROTOCOL != 0 {
        Err(Errno::EPROTO)
    } else if status & xdma::STAT_DESC_STOPPED == 0 {
        // Woken without reaching STOP (idle_stopped after Run was cleared, or a spurious wake).
        Err(Errno::EIO)
    } else {
        Ok(())
    }
}

/// A short name of the first error bit in `status`, for the kernel log.
pub fn describe(status: u32) -> &'static str {
    const NAMES: [(u32, &str); 7] = [
        (xdma::STAT_DESC_ERROR, "descriptor fetch error"),
        (xdma::STAT_READ_ERROR, "read error"),
        (xdma::STAT_WRITE_ERROR, "write error"),
        (xdma::STAT_MAGIC_STOPPED, "bad descriptor magic"),
        (xdma::STAT_INVALID_LENGTH, "invalid descriptor length"),
        (xdma::STAT_ALIGN_MISMATCH, "alignment mismatch"),
        (xdma::STAT_IDLE_STOPPED, "stopped while idle"),
    ];
    NAMES
        .iter()
        .find(|(bit, _)| status & bit != 0)
        .map_or("no stop", |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_stop_is_ok() {
        assert_eq!(
            outcome(xdma::STAT_DESC_STOPPED | xdma::STAT_DESC_COMPLETED),
            Ok(())
        );
    }

    #[test]
    fn errors_map_to_errno() {
        let stop = xdma::STAT_DESC_STOPPED;
        assert_eq!(outcome(stop | xdma::STAT_READ_ERROR_UR), Err(Errno::EIO));
        assert_eq!(
            outcome(stop | xdma::STAT_WRITE_ERROR_DECODE),
            Err(Errno::EIO)
        );
        assert_eq!(outcome(xdma::STAT_DESC_ERROR_UR), Err(Errno::EIO));
        assert_eq!(outcome(xdma::STAT_MAGIC_STOPPED), Err(Errno::EPROTO));
        assert_eq!(outcome(xdma::STAT_INVALID_LENGTH), Err(Errno::EPROTO));
        assert_eq!(outcome(xdma::STAT_IDLE_STOPPED), Err(Errno::EIO));
        assert_eq!(outcome(0), Err(Errno::EIO));
        assert_eq!(
            describe(xdma::STAT_MAGIC_STOPPED | stop),
            "bad descriptor magic"
        );
        assert_eq!(describe(stop), "no stop");
    }
}
