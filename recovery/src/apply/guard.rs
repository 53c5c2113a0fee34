//! The check made right before every table commit ([`CommitGuard`]): the route fence of
//! `tidemark apply --route` ([`RouteFence`]), shared as a [`Guard`].

/// Checked right before every table commit: a fenced writer (the route moved past the
/// generation it started under) must never commit to a table that readers have left.
#[async_trait::async_trait]
pub trait CommitGuard: Send + Sync {
    async fn check(&self) -> Result<(), String>;
}

/// The route fence as a commit guard: refuses once the route moved past the generation the
/// writer started under.
pub struct RouteFence {
    pub routes: tidemark_router::RouteStore,
    pub fence: tidemark_router::Fence,
}

#[async_trait::async_trait]
impl CommitGuard for RouteFence {
    async fn check(&self) -> Result<(), String> {
        self.fence.check(&self.routes).await.map_err(|e| e.to_string())
    }
}

/// A shared [`CommitGuard`].
#[derive(Clone)]
pub struct Guard(pub std::sync::Arc<dyn CommitGuard>);

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guard")
    }
}
