//! Turning `PJRT_Error*` results into `RuntimeError`s, and awaiting `PJRT_Event`s.

use crate::error::{Result, RuntimeError};
use crate::ffi;
use crate::plugin::c_str_lossy;

/// Converts a PJRT error (if any) into a `RuntimeError::Pjrt` carrying the plugin's message,
/// and frees it.
pub(crate) fn check(
    api: &ffi::PJRT_Api,
    call: &'static str,
    err: *mut ffi::PJRT_Error,
) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    let mut msg: ffi::PJRT_Error_Message_Args = ffi::args();
    msg.error = err;
    let message = match api.PJRT_Error_Message {
        Some(f) => {
            // SAFETY: err is a live error; the message lives until it is destroyed.
            unsafe { f(&mut msg) };
            c_str_lossy(msg.message, msg.message_size)
        }
        None => "(plugin gave no message)".to_string(),
    };
    let mut code_args: ffi::PJRT_Error_GetCode_Args = ffi::args();
    code_args.error = err;
    let code = match api.PJRT_Error_GetCode {
        // SAFETY: as above.
        Some(f) if unsafe { f(&mut code_args) }.is_null() => {
            format!("{:?}", code_args.code).replace("PJRT_Error_Code_", "")
        }
        _ => "UNKNOWN".to_string(),
    };
    let mut destroy: ffi::PJRT_Error_Destroy_Args = ffi::args();
    destroy.error = err;
    if let Some(f) = api.PJRT_Error_Destroy {
        // SAFETY: err is live and destroyed exactly once.
        unsafe { f(&mut destroy) };
    }
    Err(RuntimeError::Pjrt {
        call,
        code,
        message,
    })
}

/// Calls a PJRT function pointer that must exist in every plugin of our API version
/// (checked at load: `struct_size` covers the whole table).
macro_rules! pjrt {
    ($api:expr, $name:ident, $args:expr) => {{
        let api: &$crate::ffi::PJRT_Api = $api;
        let f = api.$name.expect(concat!(
            stringify!($name),
            " is in every PJRT plugin of this API version"
        ));
        // SAFETY: args is a valid, initialized argument struct for this call.
        let err = unsafe { f($args) };
        $crate::pjrt_call::check(api, stringify!($name), err)
    }};
}
pub(crate) use pjrt;

/// Waits for `event`, returns its error (if any), and destroys it.
pub(crate) fn await_event(api: &ffi::PJRT_Api, event: *mut ffi::PJRT_Event) -> Result<()> {
    if event.is_null() {
        return Ok(());
    }
    let mut a: ffi::PJRT_Event_Await_Args = ffi::args();
    a.event = event;
    let awaited = pjrt!(api, PJRT_Event_Await, &mut a);
    destroy_event(api, event);
    awaited
}

pub(crate) fn destroy_event(api: &ffi::PJRT_Api, event: *mut ffi::PJRT_Event) {
    if event.is_null() {
        return;
    }
    let mut d: ffi::PJRT_Event_Destroy_Args = ffi::args();
    d.event = event;
    let _ = pjrt!(api, PJRT_Event_Destroy, &mut d);
}
