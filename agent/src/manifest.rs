//! The bitstream manifest the image ships (`manifest.json`, written by `fpga-bitstream/build.sh` for Vivado
//! images and by `fpga-bitstream/model-images.sh` for FPGA-model images): which files exist, their sha256,
//! and the ID block a card must show after loading them.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// What a card's ID block says about the design it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Identity {
    /// `picoevb_regs::idblock::version` encoding; 0 = no ID block (reference design).
    pub design_version: u32,
    pub build_hash: u32,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.design_version == 0 {
            return f.write_str("no ID block (reference design?)");
        }
        let (a, b, c) = picoevb_regs::idblock::version_parts(self.design_version);
        write!(f, "{a}.{b}.{c} build {:08x}", self.build_hash)
    }
}

#[derive(Deserialize)]
struct RawIdBlock {
    design_version: String,
    build_hash: String,
}

#[derive(Deserialize)]
struct RawFile {
    name: String,
    role: String,
    sha256: String,
}

#[derive(Deserialize)]
struct RawManifest {
    schema: u32,
    version: String,
    id_block: RawIdBlock,
    #[serde(default)]
    golden: Option<RawIdBlock>,
    files: Vec<RawFile>,
}

/// One image file of the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageFile {
    pub path: PathBuf,
    /// e.g. `update-bit`, `update-bin`, `model-update`.
    pub role: String,
    pub sha256: String,
}

/// An image read once and checked against the manifest: the loaders program these bytes, never the file
/// again (the file may change between the check and the programming, which follows a PCI remove).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub file: ImageFile,
    pub bytes: Vec<u8>,
}

impl Image {
    /// The file's plain name (the manifest refuses any other).
    pub fn name(&self) -> String {
        self.file
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// A parsed manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Design version string (`1.0.0`).
    pub version: String,
    /// The ID block every update image produces.
    pub expected: Identity,
    /// The golden (fallback) design's ID block, when the manifest knows it.
    pub golden: Option<Identity>,
    pub files: Vec<ImageFile>,
}

/// What is wrong with a manifest or one of its images.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The manifest at `path` is malformed.
    #[error("{}: {why}", path.display())]
    In {
        path: PathBuf,
        why: Box<ManifestError>,
    },
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("schema {0} (this agent reads schema 1)")]
    Schema(u32),
    #[error("file name '{0}' must be a plain name")]
    NotPlain(String),
    #[error("{what}: '{value}' is not a 32-bit hex word")]
    NotHexWord { what: String, value: String },
    #[error("the manifest has no '{0}' image")]
    NoRole(String),
    /// A damaged or replaced image: it never reaches a card.
    #[error("{}: sha256 {found} does not match the manifest's {want}", path.display())]
    Mismatch {
        path: PathBuf,
        found: String,
        want: String,
    },
}

fn hex_word(s: &str, what: &str) -> Result<u32, ManifestError> {
    let digits = s.trim_start_matches("0x");
    u32::from_str_radix(digits, 16).map_err(|_| ManifestError::NotHexWord {
        what: what.to_string(),
        value: s.to_string(),
    })
}

fn identity(raw: &RawIdBlock, what: &str) -> Result<Identity, ManifestError> {
    Ok(Identity {
        design_version: hex_word(&raw.design_version, &format!("{what}.design_version"))?,
        build_hash: hex_word(&raw.build_hash, &format!("{what}.build_hash"))?,
    })
}

impl Manifest {
    /// Reads `dir/manifest.json`.
    pub fn load(dir: &Path) -> Result<Self, ManifestError> {
        let path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&path).map_err(|source| ManifestError::Read {
            path: path.clone(),
            source,
        })?;
        Self::parse(dir, &text).map_err(|why| ManifestError::In {
            path,
            why: Box::new(why),
        })
    }

    /// Parses a manifest whose files live in `dir`.
    pub fn parse(dir: &Path, text: &str) -> Result<Self, ManifestError> {
        let raw: RawManifest = serde_json::from_str(text)?;
        if raw.schema != 1 {
            return Err(ManifestError::Schema(raw.schema));
        }
        let mut files = Vec::new();
        for f in raw.files {
            if f.name.contains('/') || f.name.starts_with('.') {
                return Err(ManifestError::NotPlain(f.name));
            }
            files.push(ImageFile {
                path: dir.join(&f.name),
                role: f.role,
                sha256: f.sha256.to_ascii_lowercase(),
            });
        }
        Ok(Self {
            version: raw.version,
            expected: identity(&raw.id_block, "id_block")?,
            golden: raw
                .golden
                .as_ref()
                .map(|g| identity(g, "golden"))
                .transpose()?,
            files,
        })
    }

    /// The file with `role`, read once and checked against its sha256 (a damaged image never reaches the
    /// card).
    pub fn image(&self, role: &str) -> Result<Image, ManifestError> {
        let f = self
            .files
            .iter()
            .find(|f| f.role == role)
            .ok_or_else(|| ManifestError::NoRole(role.to_string()))?;
        let data = std::fs::read(&f.path).map_err(|source| ManifestError::Read {
            path: f.path.clone(),
            source,
        })?;
        let sum = sha256_hex(&data);
        if sum != f.sha256 {
            return Err(ManifestError::Mismatch {
                path: f.path.clone(),
                found: sum,
                want: f.sha256.clone(),
            });
        }
        Ok(Image {
            file: f.clone(),
            bytes: data,
        })
    }
}

/// Lowercase hex sha256.
pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample(dir: &Path, image: &[u8]) -> String {
        std::fs::write(dir.join("gdr-picoevb-1.0.0-model-update.img"), image).unwrap();
        format!(
            r#"{{"schema": 1, "design": "gdr-picoevb", "version": "1.0.0",
              "id_block": {{"design_version": "0x01000000", "build_hash": "0x81690a8c", "magic": "0x47445231"}},
              "golden": {{"design_version": "0x00090000", "build_hash": "0x00000001"}},
              "files": [{{"name": "gdr-picoevb-1.0.0-model-update.img", "role": "model-update", "size": {},
                          "sha256": "{}"}}]}}"#,
            image.len(),
            sha256_hex(image)
        )
    }

    #[test]
    fn parses_and_checks_the_image() {
        let dir = std::env::temp_dir().join(format!("gdr-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = Manifest::parse(&dir, &sample(&dir, b"image")).unwrap();
        assert_eq!(m.expected.design_version, 0x0100_0000);
        assert_eq!(m.expected.build_hash, 0x8169_0a8c);
        assert_eq!(m.golden.unwrap().design_version, 0x0009_0000);
        assert_eq!(m.expected.to_string(), "1.0.0 build 81690a8c");
        let image = m.image("model-update").unwrap();
        assert_eq!(image.bytes, b"image");
        assert_eq!(image.name(), "gdr-picoevb-1.0.0-model-update.img");
        assert!(matches!(
            m.image("update-bit"),
            Err(ManifestError::NoRole(r)) if r == "update-bit"
        ));
        // A damaged file is refused before it goes anywhere near a card.
        std::fs::write(dir.join("gdr-picoevb-1.0.0-model-update.img"), b"imagf").unwrap();
        assert!(matches!(
            m.image("model-update"),
            Err(ManifestError::Mismatch { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_manifests_are_refused() {
        let d = Path::new("/x");
        assert!(Manifest::parse(d, "{}").is_err());
        let bad_name = r#"{"schema":1,"version":"1","id_block":{"design_version":"0x1","build_hash":"0x2"},
            "files":[{"name":"../etc/passwd","role":"x","sha256":"00"}]}"#;
        assert!(matches!(
            Manifest::parse(d, bad_name),
            Err(ManifestError::NotPlain(_))
        ));
        let bad_word = bad_name.replace("0x1", "zz").replace("../etc/passwd", "a");
        assert!(matches!(
            Manifest::parse(d, &bad_word),
            Err(ManifestError::NotHexWord { .. })
        ));
    }
}
