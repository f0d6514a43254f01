//! Device nodes through the client crate's ioctls.

use std::path::Path;

use picoevb_abi::AbiInfo;

use crate::card::ports::Node;

/// `/dev/picoevbN` for real.
pub struct DevNode;

impl Node for DevNode {
    fn abi_info(&self, node: &Path) -> Result<AbiInfo, String> {
        let d =
            gdr_client::Device::open_path(node).map_err(|e| format!("{}: {e}", node.display()))?;
        d.abi_info().map_err(|e| format!("{}: {e}", node.display()))
    }
}
