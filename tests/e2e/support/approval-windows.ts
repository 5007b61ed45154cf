/**
 * What a member does in their approval window, as the specs drive it. WebAuthn needs a focused
 * document: a person clicks into the window first, so each step brings its page to the front.
 */
import type { Page } from 'playwright-core';

/** Where the windows are and the enrollment codes the server printed. */
export interface Household {
  readonly origin: string;
  readonly codes: Readonly<Partial<Record<'child' | 'parent', string>>>;
}

/**
 * Enrols `role` in its approval window with the printed code, through a real passkey ceremony; the
 * parent may name the household's members in the same form (`names`).
 */
export async function enrol(
  page: Page,
  household: Household,
  role: 'child' | 'parent',
  names: { readonly parent?: string; readonly child?: string } = {},
): Promise<void> {
  await page.bringToFront();
  await page.goto(`${household.origin}/approve?as=${role}`);
  if (names.parent !== undefined) await page.getByLabel('Your name').fill(names.parent);
  if (names.child !== undefined) await page.getByLabel("Your child's name").fill(names.child);
  await page.getByLabel('Enter the enrollment code printed in the terminal').fill(household.codes[role] ?? '');
  await page.getByRole('button', { name: 'Register a passkey' }).click();
  const name = role === 'parent' ? names.parent : names.child;
  await page.getByText(name === undefined ? `Signed in as ${role}` : `Signed in as ${name} (${role})`).waitFor();
}

/** Approves the pending request with the window's passkey and waits for the confirmation. */
export async function approve(page: Page): Promise<void> {
  await page.bringToFront();
  await page.getByRole('button', { name: 'Approve with passkey' }).click();
  await page
    .getByText(/Approved ✓/)
    .first()
    .waitFor();
}
