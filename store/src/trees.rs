//! [`Trees`]: the store's sled trees, each opened once and shared by every batch and read.
//!
//! Opening a tree by name takes sled's lock on its list of trees and a lookup; a batch used to
//! open each tree it touched, and to name a network's reservation tree with a string of its own.
//! The fixed trees are opened with the store, a network's reservation tree on its first use, and
//! kept: sled closes none (the store drops no tree).

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use sled::{Db, Tree};

use crate::error::Result;
use crate::keys;

/// A tree a batch writes: one of the store's fixed trees, or the reservation tree of a network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TreeName<'a> {
    /// One of the fixed trees.
    Fixed(Fixed),
    /// The reservation tree of this network.
    Ipam(&'a str),
}

/// The fixed trees a batch writes (the networks are written on their own, `Store::put_network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fixed {
    Sandboxes,
    Attachments,
    Cursors,
    Netns,
    Extensions,
}

impl Fixed {
    /// The tree's name in [`keys`], which its records' errors give.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Fixed::Sandboxes => keys::SANDBOXES,
            Fixed::Attachments => keys::ATTACHMENTS,
            Fixed::Cursors => keys::IPAM_CURSOR,
            Fixed::Netns => keys::NETNS,
            Fixed::Extensions => keys::EXTENSIONS,
        }
    }
}

/// The store's trees.
pub(crate) struct Trees {
    db: Db,
    pub(crate) sandboxes: Tree,
    pub(crate) attachments: Tree,
    pub(crate) cursors: Tree,
    pub(crate) netns: Tree,
    pub(crate) extensions: Tree,
    pub(crate) networks: Tree,
    /// Reservation trees by network, each added when first opened.
    ipam: RwLock<HashMap<String, Tree>>,
}

impl Trees {
    /// Opens (creating if needed) the fixed trees of `db`.
    pub(crate) fn open(db: &Db) -> Result<Trees> {
        Ok(Trees {
            db: db.clone(),
            sandboxes: db.open_tree(keys::SANDBOXES)?,
            attachments: db.open_tree(keys::ATTACHMENTS)?,
            cursors: db.open_tree(keys::IPAM_CURSOR)?,
            netns: db.open_tree(keys::NETNS)?,
            extensions: db.open_tree(keys::EXTENSIONS)?,
            networks: db.open_tree(keys::NETWORKS)?,
            ipam: RwLock::new(HashMap::new()),
        })
    }

    /// The tree `name`, created if needed.
    pub(crate) fn get(&self, name: TreeName) -> Result<Tree> {
        match name {
            TreeName::Fixed(tree) => Ok(self.fixed(tree).clone()),
            TreeName::Ipam(network) => self.ipam(network),
        }
    }

    fn fixed(&self, tree: Fixed) -> &Tree {
        match tree {
            Fixed::Sandboxes => &self.sandboxes,
            Fixed::Attachments => &self.attachments,
            Fixed::Cursors => &self.cursors,
            Fixed::Netns => &self.netns,
            Fixed::Extensions => &self.extensions,
        }
    }

    /// The reservation tree of `network`, created if needed.
    pub(crate) fn ipam(&self, network: &str) -> Result<Tree> {
        if let Some(tree) = self.cached(network) {
            return Ok(tree);
        }
        let tree = self.db.open_tree(keys::ipam_tree(network))?;
        self.ipam
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(network.to_owned())
            .or_insert_with(|| tree.clone());
        Ok(tree)
    }

    /// The reservation tree of `network` if it exists: a read never creates one.
    pub(crate) fn existing_ipam(&self, network: &str) -> Result<Option<Tree>> {
        if let Some(tree) = self.cached(network) {
            return Ok(Some(tree));
        }
        let name = keys::ipam_tree(network);
        if !self.db.tree_names().iter().any(|n| n == name.as_bytes()) {
            return Ok(None);
        }
        self.ipam(network).map(Some)
    }

    fn cached(&self, network: &str) -> Option<Tree> {
        self.ipam
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(network)
            .cloned()
    }
}
