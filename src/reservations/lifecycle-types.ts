/** The lifecycle messages a reservation can trigger, and what an evaluation of one can end in. */
export const LIFECYCLE_EVENTS = ['booking_confirmed', 'pre_checkin', 'post_checkout_review'] as const;
export type LifecycleEvent = (typeof LIFECYCLE_EVENTS)[number];
export const ATTEMPT_RESULTS = ['would_send', 'deferred', 'skipped', 'invalid', 'duplicate', 'error'] as const;
export type AttemptResult = (typeof ATTEMPT_RESULTS)[number];
