// @jigging/flow: FLOW Run SDK/1, TypeScript projection (Run SDK/1 §2, §9).

export type JsonValue =
  | null
  | boolean
  | number
  | string
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };

export type RunResult = {
  readonly outcome: string;
  readonly output: JsonValue;
};

export interface Attachment {
  readonly path: string;
  readonly access: "read" | "read-write";
}

export interface CallOptions {
  readonly signal?: AbortSignal;
}

export interface ChannelContractIdentity {
  readonly id: string;
  readonly version: string;
  readonly digest: string;
}

export type ChannelOptions = {
  readonly schema?: JsonValue;
  readonly contract?: string;
} & ({ readonly delivery?: "direct" } | { readonly delivery: "broadcast" });

export interface ChannelSender {
  readonly direction: "send";
  readonly delivery: "direct" | "broadcast";
  readonly contract?: ChannelContractIdentity;
  send(value: JsonValue, options?: CallOptions): Promise<void>;
  close(options?: CallOptions): Promise<void>;
}

export interface ChannelReceiver extends AsyncIterableIterator<JsonValue> {
  readonly direction: "receive";
  readonly delivery: "direct" | "broadcast";
  readonly contract?: ChannelContractIdentity;
  readonly startSequence: number;
  next(options?: CallOptions): Promise<IteratorResult<JsonValue>>;
  close(options?: CallOptions): Promise<void>;
}

export type ChannelEndpoint = ChannelSender | ChannelReceiver;

export interface ChannelPair {
  readonly send: ChannelSender;
  readonly receive: ChannelReceiver;
}

export interface ChannelBroadcast {
  readonly send: ChannelSender;
  subscribe(options?: CallOptions): Promise<ChannelReceiver>;
}

export interface ChildFlowRequest {
  readonly operationId: string;
  readonly slot: string;
  readonly intent?: string;
  readonly input: JsonValue;
  readonly channels?: Readonly<Record<string, ChannelEndpoint>>;
}

export interface CapabilityCall {
  readonly operationId: string;
  readonly slot: string;
  readonly method: string;
  readonly input: JsonValue;
  readonly channels?: Readonly<Record<string, ChannelEndpoint>>;
}

export interface RunContext {
  readonly input: JsonValue;
  readonly settings: Readonly<Record<string, JsonValue>>;
  readonly attachments: Readonly<Record<string, Attachment>>;
  readonly channels: Readonly<Record<string, ChannelEndpoint>>;
  readonly scratch: string;
  readonly deadlineUnixMs: number;
  readonly signal: AbortSignal;

  runChildFlow(call: ChildFlowRequest, options?: { signal?: AbortSignal }): Promise<RunResult>;

  callCapability(call: CapabilityCall, options?: { signal?: AbortSignal }): Promise<JsonValue>;

  channel(options: ChannelOptions & { delivery: "broadcast" }, callOptions?: CallOptions): Promise<ChannelBroadcast>;
  channel(options?: ChannelOptions & { delivery?: "direct" }, callOptions?: CallOptions): Promise<ChannelPair>;
  channel(options: ChannelOptions, callOptions?: CallOptions): Promise<ChannelPair | ChannelBroadcast>;
}

export type RunHandler = (context: RunContext) => Promise<RunResult>;

export declare function handle(handler: RunHandler): Promise<void>;

export type OperationErrorCode =
  | "CANCELLED"
  | "DEADLINE_EXCEEDED"
  | "OWNER_CLOSED"
  | "OPERATION_CONFLICT"
  | "UNAVAILABLE"
  | "PERMISSION_DENIED"
  | "RESOURCE_EXHAUSTED"
  | "INVALID_INPUT"
  | "INVALID_RESULT"
  | "UNCERTAIN"
  | "EXECUTION_FAILED"
  | "LAGGED"
  | "DISCONNECTED"
  | "PROTOCOL_ERROR"
  | "CHANNEL_LOST";

export declare class OperationError extends Error {
  constructor(code: string, message?: string, details?: JsonValue);
  readonly code: string;
  readonly details?: JsonValue;
}

export declare class CapabilityError extends Error {
  constructor(errorName: string, data: JsonValue);
  readonly errorName: string;
  readonly data: JsonValue;
}
