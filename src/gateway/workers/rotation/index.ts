/**
 * Escrow rotation and depletion replacement (spec "Rotation cycle", escrow state table, "Limits",
 * "Rotation diagnostics"). The gateway wires:
 *   const rotation = startRotation(ctx);        // call rotation.reconfigure() after every settings change
 *   const depletion = startDepletionCheck(ctx); // and onRequestEnded(ctx, id) from ctx.afterRequest
 *   GET /v1/debug/rotation → rotationDebugDocument(ctx)
 */
export { startRotation, runModel, planEscrows, type RotationTask } from './task.js';
export { startDepletionCheck, onRequestEnded, checkDepletion, type DepletionCheck } from './depletion.js';
export { rotationDebugDocument, type RotationDebugDocument } from './debug.js';
export { planRotation, type PlanInput, type RotationPlan, type PlanEscrow } from './plan.js';
export { explainRotation, formatExplain, type RotationExplanation } from '../../../projections/rotation-explain.js';
