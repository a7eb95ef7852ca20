//! Python values <-> op arguments and results.

use crate::dlpack;
use crate::ScalarType;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyFloat, PyInt, PyList, PyString, PyTuple};
use tessera_lowering::HostTensor;
use tessera_ops::{ArgValue, Output};

type Arg = ArgValue<HostTensor>;

/// One Python argument as an op argument. `what` names it in errors.
pub fn arg(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Arg> {
    if v.is_none() {
        return Ok(ArgValue::None);
    }
    if v.is_instance_of::<PyBool>() {
        return Ok(ArgValue::Bool(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return Ok(ArgValue::Int(v.extract()?));
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(ArgValue::Float(v.extract()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(ArgValue::Str(v.extract()?));
    }
    if let Ok(d) = v.cast::<ScalarType>() {
        return Ok(ArgValue::DType(d.borrow().dtype));
    }
    if v.hasattr("__dlpack__")? {
        return tensor(v, what).map(ArgValue::Tensor);
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<Arg> = v
            .try_iter()?
            .enumerate()
            .map(|(i, x)| arg(&x?, &format!("{what}[{i}]")))
            .collect::<PyResult<_>>()?;
        return list(items, what);
    }
    Err(PyTypeError::new_err(format!(
        "{what}: cannot pass a {} to an ATen op",
        v.get_type().name()?
    )))
}

pub fn tensor(v: &Bound<'_, PyAny>, what: &str) -> PyResult<HostTensor> {
    let capsule = v.call_method0("__dlpack__")?;
    // SAFETY: `capsule` is alive for this call and named "dltensor" (checked by the call).
    let ptr = unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), c"dltensor".as_ptr()) };
    if ptr.is_null() {
        return Err(PyErr::take(v.py()).unwrap_or_else(|| {
            PyTypeError::new_err(format!("{what}: __dlpack__ gave no dltensor capsule"))
        }));
    }
    // SAFETY: a live, unconsumed dltensor capsule's pointer, as `read` requires.
    unsafe { dlpack::read(ptr) }.map_err(|e| PyTypeError::new_err(format!("{what}: {e}")))
}

/// A Python list as the most specific list argument.
fn list(items: Vec<Arg>, what: &str) -> PyResult<Arg> {
    use ArgValue as V;
    if items.iter().all(|x| matches!(x, V::Int(_))) {
        return Ok(V::IntList(
            items
                .into_iter()
                .map(|x| if let V::Int(i) = x { i } else { 0 })
                .collect(),
        ));
    }
    if items.iter().all(|x| matches!(x, V::Bool(_))) {
        return Ok(V::BoolList(
            items
                .into_iter()
                .map(|x| matches!(x, V::Bool(true)))
                .collect(),
        ));
    }
    if items.iter().all(|x| matches!(x, V::Int(_) | V::Float(_))) {
        return Ok(V::FloatList(
            items
                .into_iter()
                .map(|x| match x {
                    V::Int(i) => i as f64,
                    V::Float(f) => f,
                    _ => 0.0,
                })
                .collect(),
        ));
    }
    if items.iter().all(|x| matches!(x, V::Tensor(_))) {
        return Ok(V::TensorList(
            items
                .into_iter()
                .filter_map(|x| if let V::Tensor(t) = x { Some(t) } else { None })
                .collect(),
        ));
    }
    if items.iter().all(|x| matches!(x, V::Tensor(_) | V::None)) {
        return Ok(V::OptTensorList(
            items
                .into_iter()
                .map(|x| if let V::Tensor(t) = x { Some(t) } else { None })
                .collect(),
        ));
    }
    Err(PyTypeError::new_err(format!(
        "{what}: a list mixing {} is not an ATen argument",
        kinds(&items)
    )))
}

fn kinds(items: &[Arg]) -> String {
    let mut k: Vec<&str> = items.iter().map(|x| x.kind()).collect();
    k.dedup();
    k.join(" and ")
}

/// A host tensor as `(dtype name, shape, bytearray)`, which the Python side wraps in a torch
/// tensor without another copy.
pub fn host(py: Python<'_>, t: &HostTensor) -> PyResult<Py<PyAny>> {
    let bytes = PyByteArray::new(py, t.bytes());
    Ok((t.dtype().name(), t.shape().to_vec(), bytes)
        .into_pyobject(py)?
        .into_any()
        .unbind())
}

pub fn output(py: Python<'_>, o: &Output) -> PyResult<Py<PyAny>> {
    Ok(match o {
        Output::Tensor(t) => host(py, t)?,
        Output::Tensors(ts) => PyList::new(
            py,
            ts.iter()
                .map(|t| host(py, t))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any()
        .unbind(),
        Output::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Output::Float(x) => x.into_pyobject(py)?.into_any().unbind(),
        Output::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Output::None => py.None(),
    })
}
