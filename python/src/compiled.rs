//! `torch.compile`'s programs (`tessera._native.CompiledFunction`): a Python function over
//! eager tensors (the interpreter of an FX graph, `python/tessera/compile.py`) traced once by
//! `tessera_eager::compile` into one program and replayed; a replay runs no Python.

use crate::eager::{err, EagerTensor};
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::cell::RefCell;
use std::rc::Rc;
use tessera_eager::{compile, CompiledFn, EagerError, Tensor};

type Traced = Box<dyn FnMut(&[Tensor]) -> tessera_eager::Result<Vec<Tensor>>>;

#[pyclass(unsendable, module = "tessera._native", name = "CompiledFunction")]
pub struct CompiledFunction {
    inner: CompiledFn<Traced>,
    /// The Python exception the traced function raised, if it did (the eager runtime only
    /// carries its own errors; this one is re-raised as it was).
    raised: Rc<RefCell<Option<PyErr>>>,
}

#[pymethods]
impl CompiledFunction {
    /// `f(list[EagerTensor]) -> list[EagerTensor]`, traced on the first call.
    #[new]
    fn new(f: Py<PyAny>) -> Self {
        let raised = Rc::new(RefCell::new(None));
        let slot = raised.clone();
        let traced: Traced = Box::new(move |inputs: &[Tensor]| {
            Python::attach(|py| {
                let call = || -> PyResult<Vec<Tensor>> {
                    let args = inputs
                        .iter()
                        .map(|t| Py::new(py, EagerTensor { t: t.clone() }))
                        .collect::<PyResult<Vec<_>>>()?;
                    let outs = f.call1(py, (PyList::new(py, args)?,))?;
                    outs.bind(py)
                        .try_iter()?
                        .map(|o| Ok(o?.cast::<EagerTensor>()?.get().t.clone()))
                        .collect()
                };
                call().map_err(|e| {
                    let msg = e.to_string();
                    *slot.borrow_mut() = Some(e);
                    EagerError::Usage(format!("the compiled function raised: {msg}"))
                })
            })
        });
        CompiledFunction {
            inner: compile(traced),
            raised,
        }
    }

    /// Runs the program on `inputs` (the results stay on the device).
    fn __call__(
        &mut self,
        py: Python<'_>,
        inputs: Vec<PyRef<'_, EagerTensor>>,
    ) -> PyResult<Py<PyList>> {
        let inputs: Vec<Tensor> = inputs.iter().map(|t| t.t.clone()).collect();
        let outs = self.inner.call(&inputs);
        if let Some(e) = self.raised.borrow_mut().take() {
            return Err(e);
        }
        let outs = outs
            .map_err(err)?
            .into_iter()
            .map(|t| Py::new(py, EagerTensor { t }))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyList::new(py, outs)?.unbind())
    }

    /// Whether the next call with the same argument types replays the traced program.
    #[getter]
    fn is_traced(&self) -> bool {
        self.inner.is_traced()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CompiledFunction>()
}
