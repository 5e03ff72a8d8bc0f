//! Checks of the provider itself: its name, which is the scheme of its provider IDs.

use cloud_controllers::cloud::CloudProvider;

use super::vocabulary::{Check, Verdict, check, expect, passed};
use crate::fixture::Fixture;

pub(super) const CHECKS: &[Check] = &[check!(
    provider_name_is_a_usable_scheme,
    Provider,
    "cloud.go Interface.ProviderName: the name is the scheme of `<ProviderName>://<instance-id>` \
     provider IDs (GetInstanceProviderID) and names the provider in logs; `external` is reserved \
     (InitCloudProvider treats it as no provider)"
)];

/// Non-empty, not `external`, and usable before `://` (no `/`, `:` or whitespace).
pub(super) async fn provider_name_is_a_usable_scheme(
    p: &dyn CloudProvider,
    _: &Fixture,
) -> Verdict {
    let name = p.provider_name();
    let usable = !name.is_empty()
        && name != "external"
        && !name.contains(|c: char| c == '/' || c == ':' || c.is_whitespace());
    expect(
        usable,
        "a non-empty provider name other than \"external\", without '/', ':' or spaces",
        name,
    )?;
    passed()
}
