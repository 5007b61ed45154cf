// Public entry of the shop agent (another organisation's software: npm packages and its own
// code only). The runnable server is `main.ts`; this entry is for tests and embedding.

export { type AnthropicClerkOptions, createAnthropicClerk } from './anthropic-clerk.js';
export type { Clerk, ClerkProposal, ClerkRequest } from './clerk.js';
export { createDeterministicClerk } from './deterministic-clerk.js';
export { type DidDocument, didDocument } from './did-document.js';
export { type DidKey, didKeyFromJwk, type Ed25519PublicJwk, jwkFromDidKey } from './did-key.js';
export {
  DEFAULT_MAX_REQUESTS_PER_ADDRESS,
  type HttpServerOptions,
  type RunningHttpServer,
  startHttpServer,
} from './http-server.js';
export { KEY_FILE_NAME, loadOrCreateMerchantKey, type MerchantKey } from './key-store.js';
export { MENU, type MenuItem } from './menu.js';
export { type OrderStore, openOrderStore, type StoredOrder } from './order-store.js';
export {
  CURRENCY,
  checkPolicyFloor,
  type FloorDecision,
  floorPriceCents,
  type InvoiceLine,
  MAX_DISCOUNT_PERCENT,
  MAX_QTY,
  MAX_TOTAL_CENTS,
  MIN_QTY,
  type OrderRequest,
  type Terms,
  type Violation,
  type ViolationCode,
} from './policy-floor.js';
export { createShop, type Shop, type ShopOptions, type ShopOutcome } from './shop.js';
export { SHOP_ERROR_CODES, ShopError, type ShopErrorCode } from './shop-error.js';
export { createShopServer, type ShopServerOptions } from './shop-server.js';
export { CLOCK_SKEW_SECONDS, checkTimeClaims, MAX_LIFETIME_SECONDS, type TimeClaimsVerdict } from './time-claims.js';
export { invoiceHash, type ReceiptVerification, verifyReceipt } from './verify-receipt.js';
export {
  type CheckpointWitness,
  DEFAULT_WITNESS_LIMITS,
  type HeldCheckpoint,
  openCheckpointWitness,
  type WitnessLimits,
  WitnessSubmitInput,
} from './witness.js';
export { createWitnessServer, WITNESS_TOOL_NAMES } from './witness-server.js';
