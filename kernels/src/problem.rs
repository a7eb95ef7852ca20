//! The problem shape of a shipped kernel from its inputs' shapes (tessera_export::problem_of).

use crate::ShippedKernel;

impl ShippedKernel {
    /// The problem shape whose inputs have `shapes`, or why there is none (the message names
    /// the kernel, the shapes it takes and the shapes it got).
    pub fn problem_of(&self, shapes: &[Vec<usize>]) -> Result<Vec<usize>, String> {
        tessera_export::problem_of(self.name, self.problem_dims, self.input_shapes, shapes)
    }
}
