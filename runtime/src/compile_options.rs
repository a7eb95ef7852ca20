//! Serialized `xla.CompileOptionsProto` handed to `PJRT_Client_Compile`.
//!
//! We write the few protobuf fields we need by hand (field tags + varints) rather than pull in
//! a protobuf toolchain: `executable_build_options` (field 3) with `device_ordinal` (1),
//! `num_replicas` (4) and `num_partitions` (5), and `env_option_overrides` (7: a map from an
//! XLA debug option's name to an `OptionOverrideProto`, which the compiler applies over its
//! defaults, unlike a whole `debug_options` message, which would replace them).

/// Options for one compile. The default compiles for one replica and one partition on the
/// client's default device, which is what single-device kernels and eager ops need.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    pub device_ordinal: i64,
    pub num_replicas: i64,
    pub num_partitions: i64,
    /// XLA debug options set for this compile only (`xla_cpu_use_xnnpack` = false), in order.
    pub option_overrides: Vec<(String, OptionOverride)>,
}

/// One value of `CompileOptions::option_overrides` (`xla.OptionOverrideProto`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OptionOverride {
    Str(String),
    Bool(bool),
    Int(i64),
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            device_ordinal: -1,
            num_replicas: 1,
            num_partitions: 1,
            option_overrides: Vec::new(),
        }
    }
}

impl CompileOptions {
    /// These options with `name` set to `value`, unless they already set `name` (a caller's
    /// own choice wins over a platform default).
    pub fn with_default_override(&self, name: &str, value: OptionOverride) -> CompileOptions {
        let mut o = self.clone();
        if !o.option_overrides.iter().any(|(n, _)| n == name) {
            o.option_overrides.push((name.to_string(), value));
        }
        o
    }

    /// The protobuf wire bytes.
    pub fn to_proto_bytes(&self) -> Vec<u8> {
        let mut build = Vec::new();
        field_varint(&mut build, 1, self.device_ordinal as u64);
        field_varint(&mut build, 4, self.num_replicas as u64);
        field_varint(&mut build, 5, self.num_partitions as u64);
        let mut out = Vec::new();
        field_bytes(&mut out, 3, &build);
        for (name, value) in &self.option_overrides {
            let mut v = Vec::new();
            match value {
                OptionOverride::Str(s) => field_bytes(&mut v, 1, s.as_bytes()),
                OptionOverride::Bool(b) => field_varint(&mut v, 2, *b as u64),
                OptionOverride::Int(i) => field_varint(&mut v, 3, *i as u64),
            }
            // A map entry is a message of key (1) and value (2).
            let mut entry = Vec::new();
            field_bytes(&mut entry, 1, name.as_bytes());
            field_bytes(&mut entry, 2, &v);
            field_bytes(&mut out, 7, &entry);
        }
        out
    }
}

fn field_varint(out: &mut Vec<u8>, field: u8, v: u64) {
    out.push(field << 3);
    varint(out, v);
}

fn field_bytes(out: &mut Vec<u8>, field: u8, bytes: &[u8]) {
    out.push((field << 3) | 2); // length-delimited
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_matches_the_measured_working_bytes() {
        // Bytes measured to work with the XLA CPU plugin and libtpu (shared/DESIGN.md).
        let want = [
            0x1a, 0x0f, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x20,
            0x01, 0x28, 0x01,
        ];
        assert_eq!(CompileOptions::default().to_proto_bytes(), want);
    }

    #[test]
    fn overrides_are_map_entries_of_field_7() {
        let o = CompileOptions::default()
            .with_default_override("ab", OptionOverride::Bool(false))
            .with_default_override("ab", OptionOverride::Bool(true));
        assert_eq!(o.option_overrides.len(), 1, "the first setting wins");
        let bytes = o.to_proto_bytes();
        let base = CompileOptions::default().to_proto_bytes();
        // field 7, length 8: key (field 1, "ab"), value (field 2, length 2: bool_field 2 = 0).
        let entry = [0x3a, 0x08, 0x0a, 0x02, b'a', b'b', 0x12, 0x02, 0x10, 0x00];
        assert_eq!(&bytes[..base.len()], &base[..]);
        assert_eq!(&bytes[base.len()..], &entry[..]);
    }
}
