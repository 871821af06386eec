package scheduling

// HeldCapacityMetric is the scheduler's gauge of the capacity that plans of
// gangs in flight and the head hold keep from other pods with no pod
// reserved on it yet, with a resource label. The plugin exports it; a
// benchmark reads it to count that capacity as held.
const HeldCapacityMetric = "gpu_gang_held_capacity"
