/** The closed set of reasons the shop fails unexpectedly (expected refusals are values, not errors). */
export const SHOP_ERROR_CODES = [
  'config',
  'key-store',
  'order-store',
  'signing',
  'transport',
  'witness-store',
] as const;

/** One of {@link SHOP_ERROR_CODES}. */
export type ShopErrorCode = (typeof SHOP_ERROR_CODES)[number];

/**
 * The shop agent's single error base class: an unexpected fault with a closed `code`
 * and the original `cause` kept, so logs say what broke without string matching.
 */
export class ShopError extends Error {
  override readonly name = 'ShopError';
  readonly code: ShopErrorCode;

  constructor(code: ShopErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}
