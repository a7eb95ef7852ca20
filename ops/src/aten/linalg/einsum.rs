//! `einsum(equation, tensors)`: the equation parsed as PyTorch does (implicit or explicit
//! output, `...` broadcasting, a label repeated within an operand takes the diagonal), then the
//! operands contracted left to right, each step one `dot_general` (or a broadcast product when
//! nothing is summed).

use super::contract;
use crate::args::Args;
use crate::aten::reduction::{acc_dtype, reduce, torch_name};
use crate::aten::util::cast;
use crate::error::{LowerError, LowerResult};
use crate::lower::{Lower, Out};
use tessera_lowering::stablehlo::{BinaryOp, Comparison, DotDims, ReduceKind, TensorType, Value};
use tessera_lowering::DType;

/// Label ids: `A`-`Z` are 0..26, `a`-`z` 26..52, the ellipsis dims 52.. (aligned right).
type Label = usize;
const ELLIPSIS: Label = 52;

fn err(msg: impl std::fmt::Display) -> LowerError {
    LowerError::invalid(format!("einsum(): {msg}"))
}

fn label_char(l: Label) -> String {
    match l {
        0..=25 => ((b'A' + l as u8) as char).to_string(),
        26..=51 => ((b'a' + (l - 26) as u8) as char).to_string(),
        _ => "...".to_string(),
    }
}

/// One side's subscripts: letters and where the ellipsis stands (`None`: no ellipsis).
struct Term {
    letters: Vec<Label>,
    ellipsis_at: Option<usize>,
}

/// Parses one term starting at byte `offset` of the equation (for error positions).
fn parse_term(s: &str, offset: usize, what: &str) -> LowerResult<Term> {
    let b = s.as_bytes();
    let (mut letters, mut ellipsis_at) = (Vec::new(), None);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            c @ b'A'..=b'Z' => letters.push((c - b'A') as Label),
            c @ b'a'..=b'z' => letters.push((c - b'a') as Label + 26),
            b'.' => {
                if ellipsis_at.is_some() || !s[i..].starts_with("...") {
                    return Err(err(format!("found '.' for {what} that is not part of any ellipsis")));
                }
                ellipsis_at = Some(letters.len());
                i += 2;
            }
            b' ' => {}
            _ => {
                return Err(err(format!(
                    "invalid subscript given at index {} in the equation string, subscripts must be in [a-zA-Z]",
                    offset + i
                )))
            }
        }
        i += 1;
    }
    Ok(Term {
        letters,
        ellipsis_at,
    })
}

/// Sums `x` over the dims whose labels `drop` selects; returns the value and remaining labels.
fn sum_out(
    cx: &mut Lower,
    x: Value,
    labels: Vec<Label>,
    drop: impl Fn(Label) -> bool,
) -> LowerResult<(Value, Vec<Label>)> {
    let dims: Vec<usize> = (0..labels.len()).filter(|&i| drop(labels[i])).collect();
    if dims.is_empty() {
        return Ok((x, labels));
    }
    let xa = cast(cx, &x, acc_dtype(x.dtype()))?;
    let r = reduce(cx, &xa, ReduceKind::Sum, &dims, false)?;
    let x = cast(cx, &r, x.dtype())?;
    let labels = labels.into_iter().filter(|&l| !drop(l)).collect();
    Ok((x, labels))
}

/// Takes the diagonal of every label repeated in one operand (`ii` -> `i`).
fn diagonals(
    cx: &mut Lower,
    mut x: Value,
    mut labels: Vec<Label>,
    operand: usize,
) -> LowerResult<(Value, Vec<Label>)> {
    loop {
        let rep = (0..labels.len()).find_map(|p| {
            ((p + 1)..labels.len())
                .find(|&q| labels[q] == labels[p])
                .map(|q| (p, q))
        });
        let Some((p, q)) = rep else {
            return Ok((x, labels));
        };
        let (sp, sq) = (x.shape()[p], x.shape()[q]);
        if sp != sq {
            return Err(err(format!(
                "subscript {} is repeated for operand {operand} but the sizes don't match, {sq} != {sp}",
                label_char(labels[p])
            )));
        }
        let ty = TensorType::new(x.shape(), DType::I64);
        let ip = cx.iota(ty.clone(), p)?;
        let iq = cx.iota(ty, q)?;
        let on_diag = cx.compare(Comparison::Eq, &ip, &iq)?;
        let zero = cx.zeros(x.ty().clone())?;
        let masked = cx.select(&on_diag, &x, &zero)?;
        // Exactly one term per sum is nonzero: no accumulation error in any dtype.
        x = reduce(cx, &masked, ReduceKind::Sum, &[q], false)?;
        labels.remove(q);
    }
}

/// `x` (with `labels`) broadcast to the sizes in `size` for each of `labels`.
fn expand(
    cx: &mut Lower,
    x: &Value,
    labels: &[Label],
    size: impl Fn(Label) -> usize,
) -> LowerResult<Value> {
    let shape: Vec<usize> = labels.iter().map(|&l| size(l)).collect();
    Ok(cx.broadcast_to(x, &shape)?)
}

/// One contraction step: `a` and `b` summed over their shared labels not in `keep`.
fn pair(
    cx: &mut Lower,
    (a, la): (Value, Vec<Label>),
    (b, lb): (Value, Vec<Label>),
    keep: &[Label],
    sizes: &[usize],
) -> LowerResult<(Value, Vec<Label>)> {
    // Labels only one side has and nobody needs later are summed out first.
    let (a, la) = sum_out(cx, a, la, |l| !keep.contains(&l) && !lb.contains(&l))?;
    let (b, lb) = sum_out(cx, b, lb, |l| !keep.contains(&l) && !la.contains(&l))?;
    // Shared labels of size 1 on one side broadcast to the other's size.
    let full = |l: Label| sizes[l];
    let sa: Vec<usize> = la
        .iter()
        .map(|&l| {
            if lb.contains(&l) {
                full(l)
            } else {
                a.shape()[la.iter().position(|&m| m == l).unwrap_or(0)]
            }
        })
        .collect();
    let a = cx.broadcast_to(&a, &sa)?;
    let sb: Vec<usize> = lb
        .iter()
        .map(|&l| {
            if la.contains(&l) {
                full(l)
            } else {
                b.shape()[lb.iter().position(|&m| m == l).unwrap_or(0)]
            }
        })
        .collect();
    let b = cx.broadcast_to(&b, &sb)?;
    let shared: Vec<Label> = la.iter().copied().filter(|l| lb.contains(l)).collect();
    let batch: Vec<Label> = shared
        .iter()
        .copied()
        .filter(|l| keep.contains(l))
        .collect();
    let summed: Vec<Label> = shared
        .iter()
        .copied()
        .filter(|l| !keep.contains(l))
        .collect();
    let mut out: Vec<Label> = batch.clone();
    out.extend(la.iter().copied().filter(|l| !shared.contains(l)));
    out.extend(lb.iter().copied().filter(|l| !shared.contains(l)));
    let pos = |ls: &[Label], l: Label| ls.iter().position(|&m| m == l).unwrap_or(0);
    if summed.is_empty() {
        // An elementwise (outer/batched) product: exact, and fine for bool.
        let size_of = |l: Label| {
            if la.contains(&l) {
                a.shape()[pos(&la, l)]
            } else {
                b.shape()[pos(&lb, l)]
            }
        };
        let shape: Vec<usize> = out.iter().map(|&l| size_of(l)).collect();
        let da: Vec<usize> = la.iter().map(|&l| pos(&out, l)).collect();
        let db: Vec<usize> = lb.iter().map(|&l| pos(&out, l)).collect();
        let ea = cx.broadcast_in_dim(&a, &shape, &da)?;
        let eb = cx.broadcast_in_dim(&b, &shape, &db)?;
        let op = if a.dtype() == DType::Bool {
            BinaryOp::And
        } else {
            BinaryOp::Multiply
        };
        return Ok((cx.binary(op, &ea, &eb)?, out));
    }
    if a.dtype() == DType::Bool {
        return Err(LowerError::dtype(
            DType::Bool,
            "\"bmm\" not implemented for 'Bool'",
        ));
    }
    let dims = DotDims {
        lhs_batch: batch.iter().map(|&l| pos(&la, l)).collect(),
        rhs_batch: batch.iter().map(|&l| pos(&lb, l)).collect(),
        lhs_contract: summed.iter().map(|&l| pos(&la, l)).collect(),
        rhs_contract: summed.iter().map(|&l| pos(&lb, l)).collect(),
    };
    let r = contract(cx, &a, &b, &dims)?;
    let r = cast(cx, &r, a.dtype())?;
    Ok((r, out))
}

pub(super) fn einsum(cx: &mut Lower, a: &Args) -> LowerResult<Vec<Out>> {
    let eq = a.str("equation")?;
    let xs = a.tensors("tensors")?;
    let (lhs, rhs) = match eq.find("->") {
        Some(i) => (&eq[..i], Some((&eq[i + 2..], i + 2))),
        None => (eq.as_str(), None),
    };
    let mut terms = Vec::new();
    let mut offset = 0;
    for (i, s) in lhs.split(',').enumerate() {
        terms.push(parse_term(s, offset, &format!("operand {i}"))?);
        offset += s.len() + 1;
    }
    if terms.len() > xs.len() {
        return Err(err(
            "fewer operands were provided than specified in the equation",
        ));
    }
    if terms.len() < xs.len() {
        return Err(err(
            "more operands were provided than specified in the equation",
        ));
    }
    if xs.is_empty() {
        return Err(err("must provide at least one operand"));
    }
    let dtype = xs[0].dtype();
    if let Some(x) = xs.iter().find(|x| x.dtype() != dtype) {
        return Err(LowerError::invalid(format!(
            "expected scalar type {} but found {}",
            torch_name(dtype),
            torch_name(x.dtype())
        )));
    }
    // Each operand's labels, the ellipsis spread over its leftover dims.
    let mut ell_rank = 0;
    for (i, (t, x)) in terms.iter().zip(&xs).enumerate() {
        let n = t.letters.len();
        match t.ellipsis_at {
            None if n != x.rank() => {
                return Err(err(format!(
                    "the number of subscripts in the equation ({n}) does not match the number of dimensions ({}) for operand {i} and no ellipsis was given",
                    x.rank()
                )))
            }
            Some(_) if n > x.rank() => {
                return Err(err(format!(
                    "the number of subscripts in the equation ({n}) is more than the number of dimensions ({}) for operand {i}",
                    x.rank()
                )))
            }
            Some(_) => ell_rank = ell_rank.max(x.rank() - n),
            None => {}
        }
    }
    let labels: Vec<Vec<Label>> = terms
        .iter()
        .zip(&xs)
        .map(|(t, x)| match t.ellipsis_at {
            None => t.letters.clone(),
            Some(at) => {
                let e = x.rank() - t.letters.len();
                let mut l = t.letters[..at].to_vec();
                l.extend((ell_rank - e..ell_rank).map(|j| ELLIPSIS + j));
                l.extend_from_slice(&t.letters[at..]);
                l
            }
        })
        .collect();
    let ellipsis: Vec<Label> = (0..ell_rank).map(|j| ELLIPSIS + j).collect();
    let output: Vec<Label> = match rhs {
        Some((s, off)) => {
            let t = parse_term(s, off, "the output")?;
            let mut out = Vec::new();
            for (i, &l) in t.letters.iter().enumerate() {
                if t.ellipsis_at == Some(i) {
                    out.extend(&ellipsis);
                }
                if !labels.iter().any(|ls| ls.contains(&l)) {
                    return Err(err(format!(
                        "output subscript {} does not appear in the equation for any input operand",
                        label_char(l)
                    )));
                }
                if out.contains(&l) {
                    return Err(err(format!(
                        "output subscript {} appears more than once in the output",
                        label_char(l)
                    )));
                }
                out.push(l);
            }
            if t.ellipsis_at == Some(t.letters.len()) {
                out.extend(&ellipsis);
            }
            out
        }
        None => {
            let mut out = ellipsis.clone();
            let mut counts = [0usize; ELLIPSIS];
            for ls in &labels {
                for &l in ls.iter().filter(|&&l| l < ELLIPSIS) {
                    counts[l] += 1;
                }
            }
            out.extend((0..ELLIPSIS).filter(|&l| counts[l] == 1));
            out
        }
    };
    // Diagonals, then every label's size (size-1 dims broadcast). Each step's result is
    // rounded to the operands' dtype, as PyTorch's pairwise contractions are.
    let single = xs.len() == 1;
    let mut ops = Vec::new();
    for (i, (x, ls)) in xs.iter().zip(labels).enumerate() {
        ops.push(diagonals(cx, x.clone(), ls, i)?);
    }
    let mut sizes = vec![1usize; ELLIPSIS + ell_rank];
    let mut seen = vec![false; ELLIPSIS + ell_rank];
    for (i, (x, ls)) in ops.iter().enumerate() {
        for (d, &l) in ls.iter().enumerate() {
            let s = x.shape()[d];
            if !seen[l] || sizes[l] == 1 {
                sizes[l] = s;
                seen[l] = true;
            } else if s != sizes[l] && s != 1 {
                return Err(err(format!(
                    "subscript {} has size {s} for operand {i} which does not broadcast with previously seen size {}",
                    label_char(l),
                    sizes[l]
                )));
            }
        }
    }
    // Contract left to right; each step keeps what the output and later operands need.
    let mut it = ops.into_iter();
    let mut cur = it
        .next()
        .ok_or_else(|| err("must provide at least one operand"))?;
    let rest: Vec<(Value, Vec<Label>)> = it.collect();
    for k in 0..rest.len() {
        let mut keep = output.clone();
        for (_, ls) in &rest[k + 1..] {
            keep.extend(ls);
        }
        cur = pair(cx, cur, rest[k].clone(), &keep, &sizes)?;
    }
    let (mut x, mut ls) = cur;
    // A single operand: sum what the output drops (integers sum to i64, like `sum`).
    let mut out_dtype = dtype;
    if ls.iter().any(|l| !output.contains(l)) {
        if single && !dtype.is_float() {
            out_dtype = DType::I64;
            x = cast(cx, &x, DType::I64)?;
        }
        (x, ls) = sum_out(cx, x, ls, |l| !output.contains(&l))?;
    }
    let perm: Vec<usize> = output
        .iter()
        .map(|l| ls.iter().position(|m| m == l).unwrap_or(0))
        .collect();
    let x = if perm.iter().enumerate().all(|(i, &p)| i == p) {
        x
    } else {
        cx.transpose(&x, &perm)?
    };
    let x = expand(cx, &x, &output, |l| sizes[l])?;
    Ok(vec![Out::Tensor(cast(cx, &x, out_dtype)?)])
}
