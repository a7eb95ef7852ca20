//! What the tuner searches: named tunables with candidate values, and constraints a config
//! must pass before it is worth compiling and measuring.

use std::fmt;
use std::str::FromStr;

/// One named parameter (a block size, ...) and the values the tuner may give it, in an
/// order where neighbours are similar (pattern search steps through this list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tunable {
    pub name: String,
    pub candidates: Vec<i64>,
}

impl Tunable {
    pub fn new(name: impl Into<String>, candidates: impl Into<Vec<i64>>) -> Tunable {
        Tunable {
            name: name.into(),
            candidates: candidates.into(),
        }
    }
}

/// A value for every tunable, in the space's order. Displays as `bm=128,bn=64`, which is
/// also how it is stored in the cache (and parsed back).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Config(Vec<(String, i64)>);

impl Config {
    pub fn new(pairs: impl IntoIterator<Item = (impl Into<String>, i64)>) -> Config {
        Config(pairs.into_iter().map(|(n, v)| (n.into(), v)).collect())
    }

    /// The value of `name`, if the config has it.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// The value of `name` as a size; `Err` names the missing or negative tunable, so a
    /// kernel's `program` can use `?` on it.
    pub fn usize(&self, name: &str) -> Result<usize, String> {
        let v = self
            .get(name)
            .ok_or_else(|| format!("config `{self}` has no tunable `{name}`"))?;
        usize::try_from(v).map_err(|_| format!("tunable `{name}` = {v} is negative"))
    }

    pub fn pairs(&self) -> &[(String, i64)] {
        &self.0
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (n, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{n}={v}")?;
        }
        Ok(())
    }
}

impl FromStr for Config {
    type Err = String;
    fn from_str(s: &str) -> Result<Config, String> {
        if s.trim().is_empty() {
            return Ok(Config::default());
        }
        s.split(',')
            .map(|pair| {
                let (n, v) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("`{pair}` is not name=value"))?;
                let v = v
                    .trim()
                    .parse::<i64>()
                    .map_err(|e| format!("`{pair}`: {e}"))?;
                Ok((n.trim().to_string(), v))
            })
            .collect::<Result<Vec<_>, String>>()
            .map(Config)
    }
}

/// A constraint: `Err` says why a config breaks it (skipped, not measured).
pub type Constraint = Box<dyn Fn(&Config) -> Result<(), String> + Send + Sync>;

/// The search space: the cartesian product of the tunables' candidates, minus what the
/// constraints reject.
#[derive(Default)]
pub struct Space {
    pub tunables: Vec<Tunable>,
    /// Checked in order; put cheap ones (divisibility, tiling) before costly ones (VMEM,
    /// which traces the launch).
    pub constraints: Vec<Constraint>,
}

impl fmt::Debug for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Space({}, {} constraint(s))",
            self.describe(),
            self.constraints.len()
        )
    }
}

impl Space {
    pub fn new(tunables: Vec<Tunable>) -> Space {
        Space {
            tunables,
            constraints: Vec::new(),
        }
    }

    /// Adds a constraint (builder style).
    pub fn constraint(
        mut self,
        c: impl Fn(&Config) -> Result<(), String> + Send + Sync + 'static,
    ) -> Space {
        self.constraints.push(Box::new(c));
        self
    }

    /// Configs in the cartesian product (feasible or not).
    pub fn size(&self) -> usize {
        self.tunables.iter().map(|t| t.candidates.len()).product()
    }

    /// The first constraint `config` breaks.
    pub fn check(&self, config: &Config) -> Result<(), String> {
        self.constraints.iter().try_for_each(|c| c(config))
    }

    /// The config at candidate indices `at` (one per tunable, each in range).
    pub fn config_at(&self, at: &[usize]) -> Config {
        Config(
            self.tunables
                .iter()
                .zip(at)
                .map(|(t, &i)| (t.name.clone(), t.candidates[i]))
                .collect(),
        )
    }

    /// The candidate indices of `config`, if every tunable's value is one of its candidates.
    pub fn indices_of(&self, config: &Config) -> Option<Vec<usize>> {
        self.tunables
            .iter()
            .map(|t| {
                config
                    .get(&t.name)
                    .and_then(|v| t.candidates.iter().position(|&c| c == v))
            })
            .collect()
    }

    /// Index vectors of the whole product, in odometer order (last tunable fastest).
    pub fn all_indices(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new()];
        for t in &self.tunables {
            out = out
                .into_iter()
                .flat_map(|prefix| {
                    (0..t.candidates.len()).map(move |i| [prefix.clone(), vec![i]].concat())
                })
                .collect();
        }
        if self.tunables.iter().any(|t| t.candidates.is_empty()) {
            out.clear();
        }
        out
    }

    /// Index vectors of the configs that pass every constraint, in odometer order. It
    /// checks the whole product, microseconds a config: nothing next to measuring one.
    pub fn feasible(&self) -> Vec<Vec<usize>> {
        self.all_indices()
            .into_iter()
            .filter(|at| self.check(&self.config_at(at)).is_ok())
            .collect()
    }

    /// `name=[c1,c2,..];...`: part of the cache key, so a changed space is tuned again.
    pub fn describe(&self) -> String {
        self.tunables
            .iter()
            .map(|t| format!("{}={:?}", t.name, t.candidates))
            .collect::<Vec<_>>()
            .join(";")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_round_trips_through_its_display() {
        let c = Config::new([("bm", 128), ("bn", 64)]);
        assert_eq!(c.to_string(), "bm=128,bn=64");
        assert_eq!("bm=128,bn=64".parse::<Config>(), Ok(c));
        assert!("bm".parse::<Config>().is_err());
    }

    #[test]
    fn space_enumerates_and_checks() {
        let space = Space::new(vec![
            Tunable::new("a", [1, 2]),
            Tunable::new("b", [10, 20, 30]),
        ])
        .constraint(|c| {
            if c.get("a") == Some(2) && c.get("b") == Some(30) {
                Err("too big".into())
            } else {
                Ok(())
            }
        });
        assert_eq!(space.size(), 6);
        let all = space.all_indices();
        assert_eq!(all.len(), 6);
        assert_eq!(space.config_at(&all[5]).to_string(), "a=2,b=30");
        assert_eq!(
            space.check(&space.config_at(&all[5])),
            Err("too big".into())
        );
        assert_eq!(space.feasible(), all[..5].to_vec());
        assert_eq!(
            space.indices_of(&Config::new([("a", 2), ("b", 20)])),
            Some(vec![1, 1])
        );
        assert_eq!(space.indices_of(&Config::new([("a", 3), ("b", 20)])), None);
    }
}
