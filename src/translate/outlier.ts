// Outlier ejection and active health-check thresholds: the arithmetic of when an endpoint leaves and rejoins the pool (Envoy's outlier detection and health checker, simplified).
//
// Pure state records and step functions; the caller passes monotonic milliseconds.

/** `outlierDetection` in the config. */
export interface OutlierConfig {
  /** consecutive failures (trailer statuses counted as failures, resets, connect failures) that eject */
  readonly consecutiveFailures: number;
  /** ejection time = baseEjectionMs × times ejected (capped at maxEjectionMs) */
  readonly baseEjectionMs: number;
  readonly maxEjectionMs: number;
  /** at most this share of the cluster's endpoints is ejected at once (never all of them) */
  readonly maxEjectionPercent: number;
}

export interface OutlierState {
  consecutive: number;
  /** how often this endpoint has been ejected (the multiplier of the next ejection) */
  timesEjected: number;
  /** monotonic ms until which it is ejected; 0 = not ejected */
  ejectedUntil: number;
}

export function newOutlierState(): OutlierState {
  return { consecutive: 0, timesEjected: 0, ejectedUntil: 0 };
}

export function isEjected(s: OutlierState, nowMs: number): boolean {
  return s.ejectedUntil > nowMs;
}

/** How many of `n` endpoints may be ejected at once: the percentage, at least one when there
 * are two or more (as Envoy ejects one regardless), and never all of them. */
export function maxEjected(n: number, percent: number): number {
  if (n <= 1) return 0;
  const byPercent = Math.floor((n * percent) / 100);
  return Math.min(n - 1, Math.max(1, byPercent));
}

/** How long the next ejection lasts. */
export function ejectionMs(cfg: OutlierConfig, timesEjected: number): number {
  return Math.min(cfg.baseEjectionMs * Math.max(1, timesEjected), cfg.maxEjectionMs);
}

/**
 * One attempt's result on an endpoint. A success resets the streak (and, once the endpoint is
 * back, nothing else: timesEjected only decays in `forgive`). A failure that completes a streak
 * ejects it, if `ejectedNow` (endpoints of the cluster ejected at this moment) is below the cap.
 * Returns true when this call ejected the endpoint.
 */
export function recordResult(s: OutlierState, cfg: OutlierConfig, ok: boolean, nowMs: number, ejectedNow: number, endpoints: number): boolean {
  if (ok) {
    s.consecutive = 0;
    return false;
  }
  s.consecutive++;
  if (s.consecutive < cfg.consecutiveFailures || isEjected(s, nowMs)) return false;
  if (ejectedNow >= maxEjected(endpoints, cfg.maxEjectionPercent)) return false;
  s.timesEjected++;
  s.ejectedUntil = nowMs + ejectionMs(cfg, s.timesEjected);
  s.consecutive = 0;
  return true;
}

/** An endpoint that has stayed in for a whole base ejection time since it returned has its
 * multiplier lowered by one (Envoy decrements the ejection multiplier the same way). */
export function forgive(s: OutlierState, cfg: OutlierConfig, nowMs: number): void {
  if (s.timesEjected > 0 && s.ejectedUntil > 0 && nowMs - s.ejectedUntil >= cfg.baseEjectionMs) {
    s.timesEjected--;
    s.ejectedUntil = s.timesEjected === 0 ? 0 : nowMs;
  }
}

// === active health checks ===

export interface HealthThresholds {
  /** failed checks in a row that make a healthy endpoint unhealthy */
  readonly unhealthyThreshold: number;
  /** passed checks in a row that make an unhealthy endpoint healthy */
  readonly healthyThreshold: number;
}

export interface HealthState {
  healthy: boolean;
  streak: number;
}

/** Endpoints start healthy (as Envoy's do once the cluster warms): a new endpoint gets calls
 * until its checks say otherwise. */
export function newHealthState(): HealthState {
  return { healthy: true, streak: 0 };
}

/** One check's result; returns true when the endpoint's health changed. */
export function healthStep(s: HealthState, t: HealthThresholds, passed: boolean): boolean {
  if (passed === s.healthy) {
    s.streak = 0;
    return false;
  }
  s.streak++;
  if (s.streak < (s.healthy ? t.unhealthyThreshold : t.healthyThreshold)) return false;
  s.healthy = !s.healthy;
  s.streak = 0;
  return true;
}
