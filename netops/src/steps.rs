//! Several mutations in one datagram: the kernel applies them in order and acks each, so a
//! sequence that needs no answer in between costs one round trip instead of one per step.

use std::net::IpAddr;

use ipnet::IpNet;
use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
use netlink_packet_route::RouteNetlinkMessage;

use crate::error::Result;
use crate::route::Route;
use crate::rtnl::Rtnl;
use crate::{address, link, neigh, Mac};

/// One idempotent mutation, as its single call ([`Rtnl::add_address`], [`Rtnl::set_up`],
/// [`Rtnl::add_route`], [`Rtnl::add_neighbour`]) would make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// [`Rtnl::add_address`].
    Address {
        /// Interface index.
        index: u32,
        /// Address and prefix length.
        net: IpNet,
    },
    /// [`Rtnl::set_up`].
    Up(u32),
    /// [`Rtnl::add_route`].
    Route(Route),
    /// [`Rtnl::add_neighbour`].
    Neighbour {
        /// Interface index.
        index: u32,
        /// Neighbour address.
        ip: IpAddr,
        /// Its MAC.
        mac: Mac,
    },
}

impl Step {
    /// The request, its flags and its name for errors.
    fn request(&self) -> (RouteNetlinkMessage, u16, &'static str) {
        match self {
            Step::Address { index, net } => (
                RouteNetlinkMessage::NewAddress(address::add_message(*index, *net)),
                NLM_F_CREATE | NLM_F_EXCL,
                "add address",
            ),
            Step::Up(index) => (
                RouteNetlinkMessage::SetLink(link::set_up_message(*index, true)),
                0,
                "set up",
            ),
            Step::Route(route) => (
                RouteNetlinkMessage::NewRoute(crate::route::add_message(route)),
                NLM_F_CREATE | NLM_F_REPLACE,
                "add route",
            ),
            Step::Neighbour { index, ip, mac } => (
                RouteNetlinkMessage::NewNeighbour(neigh::add_message(*index, *ip, *mac)),
                NLM_F_CREATE | NLM_F_REPLACE,
                "add neighbour",
            ),
        }
    }

    /// The step through its single call, with that call's idempotency and error mapping.
    fn apply_alone(&self, rtnl: &mut Rtnl) -> Result<()> {
        match self {
            Step::Address { index, net } => rtnl.add_address(*index, *net),
            Step::Up(index) => rtnl.set_up(*index),
            Step::Route(route) => rtnl.add_route(route),
            Step::Neighbour { index, ip, mac } => rtnl.add_neighbour(*index, *ip, *mac),
        }
    }
}

impl Rtnl {
    /// Applies `steps` in order, all sent in one datagram and acked together.
    ///
    /// The kernel goes on with the next step after a failed one, so when any step fails, every
    /// step from the first failure on is applied again, one by one, through its single call: all
    /// are idempotent, so the error returned is the one the single call gives, with the steps
    /// before it applied (and, as the kernel went on, the steps after it too).
    ///
    /// A failure names the step ([`StepFailed::step`], its index in `steps`).
    pub fn apply_steps(&mut self, steps: &[Step]) -> std::result::Result<(), StepFailed> {
        let requests: Vec<_> = steps.iter().map(Step::request).collect();
        let outcomes = self
            .ack_all(requests)
            .map_err(|error| StepFailed { step: 0, error })?;
        let mut first_failed = None;
        for (k, outcome) in outcomes.into_iter().enumerate() {
            if outcome.is_err() && first_failed.is_none() {
                first_failed = Some(k);
            }
        }
        let Some(from) = first_failed else {
            return Ok(());
        };
        log::debug!(
            "step {from} of {} failed in a batch, replaying one by one",
            steps.len()
        );
        for (k, step) in steps.iter().enumerate().skip(from) {
            step.apply_alone(self)
                .map_err(|error| StepFailed { step: k, error })?;
        }
        Ok(())
    }
}

/// The step of a batch that failed, and how.
#[derive(Debug)]
pub struct StepFailed {
    /// Its index in the batch (0 as well for an I/O or protocol error of the whole batch).
    pub step: usize,
    /// The error, as the step's single call gives it.
    pub error: crate::Error,
}

#[cfg(test)]
mod tests;
