//! PJRT runtime (in progress).
