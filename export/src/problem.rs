//! The problem shape of a kernel from the shapes of the arrays a caller hands it (what a torch
//! op registered from the kernel receives), for any kernel, with no per-kernel code: the
//! kernel's `input_shapes` is probed once with distinct primes as the problem dims, which
//! shows where each problem dim appears among the inputs; the caller's shapes are read there
//! and checked against `input_shapes` of the result.

/// Distinct probe values (primes above any dim a shape function adds or divides by itself).
const PROBES: [usize; 8] = [1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049];

/// The problem shape of kernel `name` whose inputs have `shapes`, or why there is none (the
/// message names the kernel, the shapes it takes and the shapes it got).
pub fn problem_of(
    name: &str,
    problem_dims: &[&str],
    input_shapes: fn(&[usize]) -> Vec<Vec<usize>>,
    shapes: &[Vec<usize>],
) -> Result<Vec<usize>, String> {
    let rank = problem_dims.len();
    let probe = &PROBES[..rank.min(PROBES.len())];
    let probed = input_shapes(probe);
    let expected = || {
        let dims: Vec<String> = probed
            .iter()
            .map(|s| {
                let names: Vec<&str> = s
                    .iter()
                    .map(|d| {
                        probe
                            .iter()
                            .position(|p| p == d)
                            .map_or("?", |i| problem_dims[i])
                    })
                    .collect();
                format!("[{}]", names.join(", "))
            })
            .collect();
        dims.join(", ")
    };
    let wrong = || {
        format!(
            "kernel `{}` takes {} input(s) shaped {}; got {:?}",
            name,
            probed.len(),
            expected(),
            shapes
        )
    };
    if shapes.len() != probed.len() {
        return Err(wrong());
    }
    let mut problem = Vec::with_capacity(rank);
    for p in probe {
        let at = probed
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.iter().position(|d| d == p).map(|axis| (i, axis)));
        let (input, axis) = at.ok_or_else(|| {
            format!(
                "kernel `{}`: no input shows problem dim {p} (its input shapes do not depend on it)",
                name
            )
        })?;
        problem.push(*shapes[input].get(axis).ok_or_else(wrong)?);
    }
    if input_shapes(&problem) != shapes {
        return Err(wrong());
    }
    Ok(problem)
}
