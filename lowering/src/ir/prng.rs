//! The random bits of `prng_seed` / `prng_random_bits` on the interpreter and the StableHLO
//! forms: one counter-based generator, so both give the same bits for a seed, exactly. A
//! TPU draws from its hardware PRNG instead (Mosaic's `tpu.prng_set_seed_32` /
//! `tpu.prng_random_bits`), whose bits differ, as Pallas' interpret mode differs from the
//! TPU too: kernels may rely on the distribution, not on particular bits.
//!
//! All arithmetic is on `u32`, wrapping:
//! - `mix(x)`: `x ^= x >> 16; x *= MUL_1; x ^= x >> 15; x *= MUL_2; x ^= x >> 15` (a
//!   xorshift-multiply finalizer; a bijection of `u32`).
//! - The key of `prng_seed(s_0, .., s_n)`: `k = KEY_0`, then `k = mix(k ^ s_i)` per seed.
//! - Draw site `d` of the kernel (the `d`-th `prng_random_bits` call in trace order) after
//!   a seed with key `k`: `stream = mix(k ^ mix(d + 1))`, and element `e` (row-major index
//!   in the drawn tile) is `mix(stream ^ mix(e))`.
//!
//! So re-seeding with the same seeds replays the same bits (as on a TPU): mix
//! `program_id(..)` into the seeds for a different stream per grid step. A draw inside a
//! loop needs a seed set inside that loop (a traced error otherwise), so that iterations
//! differ without a running counter.

pub const MUL_1: u32 = 0x21f0_aaad;
pub const MUL_2: u32 = 0x735a_2d97;
pub const KEY_0: u32 = 0x6a09_e667;

/// The generator's bijective finalizer.
pub fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(MUL_1);
    x ^= x >> 15;
    x = x.wrapping_mul(MUL_2);
    x ^ (x >> 15)
}

/// The key that `prng_seed(seeds)` sets.
pub fn seed_key(seeds: &[u32]) -> u32 {
    seeds.iter().fold(KEY_0, |k, &s| mix(k ^ s))
}

/// The stream of draw site `site` under `key`.
pub fn stream_key(key: u32, site: u32) -> u32 {
    mix(key ^ mix(site.wrapping_add(1)))
}

/// Element `index` of a draw from `stream`.
pub fn bits(stream: u32, index: u32) -> u32 {
    mix(stream ^ mix(index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_is_a_bijection_on_a_sample_and_keys_depend_on_every_seed() {
        let outs: std::collections::HashSet<u32> = (0..1 << 16).map(mix).collect();
        assert_eq!(outs.len(), 1 << 16);
        assert_ne!(seed_key(&[1, 2]), seed_key(&[2, 1]));
        assert_ne!(seed_key(&[1]), seed_key(&[1, 0]));
        assert_ne!(stream_key(7, 0), stream_key(7, 1));
    }
}
