/** A configuration problem. Messages name the variable and never contain a secret value. */
export interface ConfigIssue {
  /** The variable concerned; null for file-level problems. */
  variable: string | null;
  message: string;
}

export class ConfigError extends Error {
  readonly issues: readonly ConfigIssue[];
  constructor(issues: readonly ConfigIssue[]) {
    super(issues.length === 1 ? `configuration error: ${issues[0]!.message}` : `configuration errors:\n${issues.map((i) => `  - ${i.message}`).join('\n')}`);
    this.name = 'ConfigError';
    this.issues = issues;
  }
}
