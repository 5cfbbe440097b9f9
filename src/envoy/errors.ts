import { ErrorCodes, RateMeshError } from '../errors.js';

/**
 * A config error: the file, the path in the YAML (`descriptors[0].rate_limit.unit`),
 * the line when known, and the reason. A {@link RateMeshError} with code
 * `ERR_CONFIG_INVALID` and `field` the YAML path.
 */
export class EnvoyConfigError extends RateMeshError {
  readonly file: string;
  readonly yamlPath: string;
  readonly line: number | undefined;
  /** What is wrong, without file, path or line (`reason` adds the file and line, as the daemon prints it). */
  readonly problem: string;

  constructor(file: string, yamlPath: string, reason: string, line?: number) {
    super(
      ErrorCodes.CONFIG_INVALID,
      `${reason} (in ${file}${line === undefined ? '' : `, line ${line}`})`,
      yamlPath,
    );
    this.message = `${file}: ${yamlPath}${line === undefined ? '' : ` (line ${line})`}: ${reason}`;
    this.name = 'EnvoyConfigError';
    this.file = file;
    this.yamlPath = yamlPath;
    this.line = line;
    this.problem = reason;
  }
}
