//! Device nodes through the client crate's ioctls.

use std::path::Path;

use picoevb_abi::AbiInfo;

use crate::card::ports::{Node, NodeError};

/// `/dev/picoevbN` for real.
pub struct DevNode;

impl Node for DevNode {
    fn abi_info(&self, node: &Path) -> Result<AbiInfo, NodeError> {
        let at = |source| NodeError {
            node: node.to_path_buf(),
            source,
        };
        gdr_client::Device::open_path(node)
            .map_err(at)?
            .abi_info()
            .map_err(at)
    }
}
