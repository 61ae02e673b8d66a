export { loadConfig, parseMode, type GatewayConfig, type GatewayMode, type InitialEscrow, type LoadConfigOptions } from './load.js';
export { ConfigError, type ConfigIssue } from './errors.js';
export { parseEnvFile, readEnvFile, formatEnvValue } from './env-file.js';
export { VARIABLES, VARIABLE_NAMES, SECRET_VARIABLES, renderEnvTable, MAX_BODY_BYTES_DEFAULT, type VariableSpec } from './variables.js';
export { generateKeys, renderInitFile, type GeneratedKeys } from './init-file.js';
