//! What a Kubernetes API error tells an operator, the same in the
//! controller and the registry's pool discovery (both include this file,
//! as they do `shared_cli.rs`).

use kube::Resource;
use kube::core::Status;
use kube::runtime::watcher;

/// The API group of the MCS CRDs (ServiceExport, ServiceImport).
const MCS_GROUP: &str = "multicluster.x-k8s.io";

/// An API server's refusal as its message and code, e.g. `forbidden: …
/// (403)`: kube's own text repeats the whole `Status`.
pub fn refusal(status: &Status) -> String {
    format!("{} ({})", status.message, status.code)
}

/// A Kubernetes client error for a log line or a message: a refusal as
/// [`refusal`] tells it, anything else with its cause chain.
#[allow(dead_code)] // the registry tells watch failures only
pub fn kube_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => refusal(status),
        other => mcs_api::chain(other),
    }
}

/// What a failed watch of `K` tells an operator: an API server's refusal
/// as its message and code (kube's text repeats the whole status), any
/// other failure with its cause chain; and for a kind the API server does
/// not serve (404), that its CRD is missing and how to install ours.
pub fn watch_failure<K: Resource<DynamicType = ()>>(error: &watcher::Error) -> String {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::WatchError(status) => refused_about::<K>(status),
        other => mcs_api::chain(other),
    }
}

/// What a failed request about `K` (a list, a get) tells an operator: as
/// [`watch_failure`] tells a watch's.
#[allow(dead_code)] // the registry tells watch failures only
pub fn request_failure<K: Resource<DynamicType = ()>>(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => refused_about::<K>(status),
        other => mcs_api::chain(other),
    }
}

/// A refusal of a request about `K`: [`refusal`], and for a kind the API
/// server does not serve (404), that its CRD is missing and how to install
/// ours.
fn refused_about<K: Resource<DynamicType = ()>>(status: &Status) -> String {
    let refused = refusal(status);
    if status.code != 404 {
        return refused;
    }
    let (group, version, plural) = (K::group(&()), K::version(&()), K::plural(&()));
    let resource = if group.is_empty() {
        format!("{plural} ({version})")
    } else {
        format!("{plural}.{group} ({version})")
    };
    let hint = if group == MCS_GROUP {
        ": install the CRDs (`mcs-controller crds | kubectl apply -f -`, or the mcs-controller chart's)"
    } else {
        ""
    };
    format!("{refused}: the API server does not serve {resource}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A kind of the MCS group, as either binary declares it.
    #[derive(Clone, Debug)]
    struct ServiceExport {
        metadata: ObjectMeta,
    }

    impl Resource for ServiceExport {
        type DynamicType = ();
        type Scope = k8s_openapi::NamespaceResourceScope;

        fn kind(_: &()) -> std::borrow::Cow<'_, str> {
            "ServiceExport".into()
        }
        fn group(_: &()) -> std::borrow::Cow<'_, str> {
            MCS_GROUP.into()
        }
        fn version(_: &()) -> std::borrow::Cow<'_, str> {
            "v1beta1".into()
        }
        fn plural(_: &()) -> std::borrow::Cow<'_, str> {
            "serviceexports".into()
        }
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    /// Before: `failed to perform initial object list: ApiError: 404 page
    /// not found: Failed to parse error data (Status { status: Some(Failure),
    /// code: 404, … })`, which said neither what was missing nor what to do.
    #[test]
    fn a_watch_of_a_kind_not_served_names_the_crd_to_install() {
        let refused = |code: u16, message: &str| {
            let mut status = kube::core::Status::failure(message, "Failed to parse error data");
            status.code = code;
            kube::Error::Api(Box::new(status))
        };
        let missing = watcher::Error::InitialListFailed(refused(404, "404 page not found"));
        let told = watch_failure::<ServiceExport>(&missing);
        assert_eq!(
            told,
            "404 page not found (404): the API server does not serve \
             serviceexports.multicluster.x-k8s.io (v1beta1): install the CRDs \
             (`mcs-controller crds | kubectl apply -f -`, or the mcs-controller chart's)"
        );
        let told = watch_failure::<k8s_openapi::api::core::v1::Service>(
            &watcher::Error::WatchFailed(refused(404, "gone")),
        );
        assert_eq!(told, "gone (404): the API server does not serve services (v1)");
        let forbidden = watcher::Error::WatchStartFailed(refused(403, "forbidden: no list"));
        assert_eq!(watch_failure::<ServiceExport>(&forbidden), "forbidden: no list (403)");
        let mut expired = kube::core::Status::failure("too old", "Expired");
        expired.code = 410;
        let status = watcher::Error::WatchError(Box::new(expired));
        assert_eq!(watch_failure::<ServiceExport>(&status), "too old (410)");
        assert_eq!(
            watch_failure::<ServiceExport>(&watcher::Error::NoResourceVersion),
            watcher::Error::NoResourceVersion.to_string()
        );
    }
}
