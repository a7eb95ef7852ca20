//! Kernel -> StableHLO emitter and the StableHLO text builder (in progress).
