//! The Mersenne Twister (MT19937) and the two NumPy legacy draws built on it
//! that pandas' `DataFrame.sample(n, random_state=seed)` makes: a
//! permutation's prefix (without replacement) and masked bounded integers
//! (with replacement). Used so `--dataset-name burstgpt` picks exactly the
//! rows vLLM picks for the same `--seed`. Pure.
//!
//! Written from the published algorithm (Matsumoto & Nishimura 1998,
//! `init_genrand` seeding) and NumPy's documented legacy behaviour:
//! `RandomState(seed).choice(n, size, replace)` is `permutation(n)[:size]`
//! without replacement (a Fisher–Yates shuffle from the last element down,
//! each swap partner drawn by masked rejection on 32-bit outputs), and
//! `randint(0, n, size)` with replacement, drawn the same masked way.

/// The MT19937 state.
#[derive(Debug, Clone)]
pub struct Mt19937 {
    state: [u32; 624],
    pos: usize,
}

impl Mt19937 {
    /// Seeded as NumPy's `RandomState(seed)` seeds an integer (`init_genrand`).
    pub fn new(seed: u32) -> Self {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, pos: 624 }
    }

    /// The next 32-bit output (`genrand_int32`).
    pub fn next_u32(&mut self) -> u32 {
        if self.pos >= 624 {
            self.twist();
        }
        let mut y = self.state[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    fn twist(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        for i in 0..624 {
            let y = (self.state[i] & UPPER) | (self.state[(i + 1) % 624] & LOWER);
            let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
            self.state[i] = self.state[(i + 397) % 624] ^ (y >> 1) ^ mag;
        }
        self.pos = 0;
    }

    /// A value in `0..=max` by masked rejection (NumPy's `random_interval`
    /// and `buffered_bounded_masked_uint32`, for `max` below 2^32).
    pub fn masked(&mut self, max: u32) -> u32 {
        if max == 0 {
            return 0;
        }
        let mut mask = max;
        mask |= mask >> 1;
        mask |= mask >> 2;
        mask |= mask >> 4;
        mask |= mask >> 8;
        mask |= mask >> 16;
        loop {
            let v = self.next_u32() & mask;
            if v <= max {
                return v;
            }
        }
    }
}

/// The row positions `DataFrame.sample(n=size, random_state=seed,
/// replace=size > rows)` takes from a frame of `rows` rows, in sample order.
/// Empty when `rows` is 0.
pub fn pandas_sample(rows: usize, size: usize, seed: u32) -> Vec<usize> {
    if rows == 0 {
        return Vec::new();
    }
    let mut rng = Mt19937::new(seed);
    let max = u32::try_from(rows - 1).unwrap_or(u32::MAX);
    if size > rows {
        return (0..size).map(|_| rng.masked(max) as usize).collect();
    }
    let mut perm: Vec<usize> = (0..rows).collect();
    for i in (1..rows).rev() {
        let j = rng.masked(u32::try_from(i).unwrap_or(u32::MAX)) as usize;
        perm.swap(i, j);
    }
    perm.truncate(size);
    perm
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_sequence_for_seed_5489() {
        // The first outputs of MT19937 seeded with 5489 (the reference
        // implementation's default seed; also C++ std::mt19937's).
        let mut mt = Mt19937::new(5489);
        let first: Vec<u32> = (0..3).map(|_| mt.next_u32()).collect();
        assert_eq!(first, [3_499_211_612, 581_869_302, 3_890_346_734]);
        let mut mt = Mt19937::new(5489);
        let ten_thousandth = (0..10_000).map(|_| mt.next_u32()).last();
        assert_eq!(ten_thousandth, Some(4_123_659_995));
    }

    #[test]
    fn samples_match_pandas() {
        // `pd.DataFrame({"i": range(rows)}).sample(n=size, random_state=seed,
        // replace=size > rows)["i"].tolist()` with pandas 3.1.1 / NumPy 2.4.6.
        assert_eq!(pandas_sample(10, 4, 0), [2, 8, 4, 9]);
        assert_eq!(pandas_sample(10, 10, 42), [8, 1, 5, 0, 7, 2, 9, 4, 3, 6]);
        assert_eq!(pandas_sample(3, 7, 0), [0, 1, 0, 1, 1, 2, 0]);
        assert_eq!(pandas_sample(1, 3, 9), [0, 0, 0]);
        assert_eq!(pandas_sample(1000, 5, 7), [778, 334, 271, 802, 216]);
        assert_eq!(pandas_sample(5, 5, 123), [1, 3, 4, 0, 2]);
        assert!(pandas_sample(0, 3, 0).is_empty());
    }
}
