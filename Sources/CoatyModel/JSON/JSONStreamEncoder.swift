import Foundation

// The streaming half of `JSONValueEncoder`: `Encodable` values written straight into JSON bytes,
// without building a `JSONValue` tree first (no tree to allocate and free: a typical Coaty object
// encodes about 15 % faster, `Codable`'s own dispatch being most of what remains).
//
// The bytes are exactly those of the tree encoder serialized. Synthesized `Codable` and ordinary
// hand-written code use containers in nesting order (a nested container is filled before its
// parent writes again), which a stream can follow. Anything it cannot reproduce in order marks the
// run as failed, and the caller encodes the value again through the tree:
// - writing to a container after a later sibling was written, or after its value's
//   `encode(to:)` returned, or while a member of it is still being written;
// - a nested container under a member name already written (the tree replaces that member; a
//   name that merely appears inside an earlier value of the object also falls back);
// - the count of an unkeyed container read after it was closed;
// - a super encoder;
// - a second value through one single-value container, or mixing container kinds on one encoder;
// - a Coaty object's `objectType`/`coreType` written by the type with a value other than the
//   instance's (the tree replaces the header member in place);
// - a value that fills custom fields into a single-value object.
// Any error thrown while streaming also falls back (even one the value catches and recovers
// from), so errors carry the tree encoder's coding path. A fallback encodes the whole top-level
// value again, so every `encode(to:)` in it runs twice (a real error is thrown by the second run).

extension JSONValueEncoder {
    /// Appends the compact JSON text of `value` to `out`: streamed when the value's containers
    /// allow it, else through the tree (same bytes either way).
    /// - Parameters:
    ///   - value: the value to encode.
    ///   - out: the buffer to append to.
    /// - Throws: as ``encode(_:)``.
    package func encode<T: Encodable>(_ value: T, appendingTo out: inout [UInt8]) throws {
        let start = out.count
        let context = StreamEncodingContext(self)
        swap(&context.out, &out)
        defer { swap(&context.out, &out) }
        do {
            try context.write(value, parent: nil, key: nil)
            if !context.failed && context.frames.isEmpty { return }
        } catch {
            // Falls back below; the tree encoder reports a real error with its coding path.
        }
        context.out.removeSubrange(start...)
        try encode(value).serialize(into: &context.out)
    }
}

/// Thrown inside a streaming run that cannot continue in order; never escapes the encoder.
struct StreamFallback: Error {}

/// An open JSON object or array of a streaming run.
struct StreamFrame {
    let id: Int
    let isObject: Bool
    /// Members or elements written so far (a comma precedes every later one).
    var count = 0
    /// Where the frame's opening bracket is in the output.
    let start: Int
    /// The header of a Coaty object: `objectType` and `coreType`, written first.
    var header: (objectType: String, coreType: String)?
    /// The member names written, kept for ``CustomFieldsCarrying`` values with custom members.
    var keys: [String]?
    /// Whether the last member or element waits for a value that user code is writing: the frame
    /// cannot take another one until then.
    var awaitingValue = false
}

/// The state of one streaming run: the output and the stack of open containers.
///
/// Used by one synchronous `encode(to:)` chain at a time, so no dynamic exclusivity checks.
final class StreamEncodingContext {
    let options: JSONValueEncoder
    @exclusivity(unchecked) var out: [UInt8] = []
    /// Open containers, innermost last.
    @exclusivity(unchecked) var frames: [StreamFrame] = []
    @exclusivity(unchecked) private var nextFrameId = 0
    /// Set when the run cannot reproduce the tree encoder's output.
    @exclusivity(unchecked) var failed = false

    init(_ options: JSONValueEncoder) {
        self.options = options
        frames.reserveCapacity(8)
    }

    /// Built on first use: most encodes never ask.
    lazy var userInfo = options.codingUserInfo

    /// Marks the run as failed and returns the error that stops it.
    func fail() -> StreamFallback {
        failed = true
        return StreamFallback()
    }

    // MARK: Frames

    func openFrame(isObject: Bool, recordKeys: Bool) -> Int {
        nextFrameId += 1
        frames.append(StreamFrame(id: nextFrameId, isObject: isObject, start: out.count, keys: recordKeys ? [] : nil))
        out.append(isObject ? UInt8(ascii: "{") : UInt8(ascii: "["))
        return nextFrameId
    }

    func closeFrames(downTo count: Int) {
        while frames.count > count {
            out.append(frames.removeLast().isObject ? UInt8(ascii: "}") : UInt8(ascii: "]"))
        }
    }

    /// The stack index of frame `id`, if it is still open.
    func index(of id: Int) -> Int? {
        var i = frames.count - 1
        while i >= 0 {
            if frames[i].id == id { return i }
            i -= 1
        }
        return nil
    }

    /// Makes frame `id` the innermost one, closing the containers opened inside it (they are done
    /// once their parent writes again); fails when it was closed already.
    @inline(__always)
    func activate(_ id: Int) throws(StreamFallback) {
        if !frames.isEmpty && frames[frames.count - 1].id == id { return }
        guard let i = index(of: id) else { throw fail() }
        closeFrames(downTo: i + 1)
    }

    /// Starts member `name` of object frame `id`: the comma, the key and the colon.
    func member(_ id: Int, _ name: String) throws(StreamFallback) {
        try activate(id)
        let i = frames.count - 1
        guard !frames[i].awaitingValue else { throw fail() }
        if frames[i].count > 0 { out.append(UInt8(ascii: ",")) }
        frames[i].count += 1
        frames[i].keys?.append(name)
        JSONSerializer.writeString(name, to: &out)
        out.append(UInt8(ascii: ":"))
    }

    /// Starts the next element of array frame `id`.
    func element(_ id: Int) throws(StreamFallback) {
        try activate(id)
        let i = frames.count - 1
        guard !frames[i].awaitingValue else { throw fail() }
        if frames[i].count > 0 { out.append(UInt8(ascii: ",")) }
        frames[i].count += 1
    }

    /// Writes the value of the member or element just started in frame `id`, which stays closed
    /// to other members while user code writes it.
    func write<T: Encodable>(_ value: T, into id: Int, parent: StreamEncoder?, key: any CodingKey) throws {
        let i = frames.count - 1
        frames[i].awaitingValue = true
        try write(value, parent: parent, key: key)
        // Frame `id` is innermost again: `write` closes what it opened, and fails otherwise.
        guard let last = frames.indices.last, frames[last].id == id else { throw fail() }
        frames[last].awaitingValue = false
    }

    /// Whether object frame `id` may have a member `name`: exact when it records its names, else
    /// whether `"name":` occurs in what it wrote (also inside a string value, which only costs a
    /// fallback; a member written is never missed).
    func mayHave(_ id: Int, _ name: String) -> Bool {
        guard let i = index(of: id) else { return true }
        if let keys = frames[i].keys { return keys.contains(name) }
        guard frames[i].count > 0 else { return false }
        var pattern: [UInt8] = []
        JSONSerializer.writeString(name, to: &pattern)
        pattern.append(UInt8(ascii: ":"))
        return out.withUnsafeBufferPointer { bytes in
            let last = bytes.count - pattern.count
            var at = frames[i].start
            while at <= last {
                if bytes[at] == pattern[0] && bytes[at..<(at + pattern.count)].elementsEqual(pattern) { return true }
                at += 1
            }
            return false
        }
    }

    /// The header value a Coaty object frame already wrote for `name`, if `name` is a header key.
    @inline(__always)
    func headerValue(_ id: Int, _ name: String) -> String? {
        let last = frames.count - 1
        guard let i = last >= 0 && frames[last].id == id ? last : index(of: id), let header = frames[i].header else {
            return nil
        }
        return name == "objectType" ? header.objectType : name == "coreType" ? header.coreType : nil
    }

    // MARK: Values

    /// Writes `value`; the one place where special types and Coaty objects are handled (as
    /// `EncodingContext.box`, with the same ``JSONValueEncoder/specialValue(_:)``).
    func write<T: Encodable>(_ value: T, parent: StreamEncoder?, key: (any CodingKey)?) throws {
        // The same text as the special value, without making a `String` (two per Coaty object).
        if T.self == CoatyUUID.self { return _identityCast(value, to: CoatyUUID.self).appendQuoted(to: &out) }
        if let special = options.specialValue(value) { return JSONSerializer.write(special, to: &out) }

        let base = frames.count
        let encoder = StreamEncoder(context: self, parent: parent, key: key, base: base)
        // Custom members are merged after the declared ones, so only then are names recorded.
        let custom = (T.self as? any CustomFieldsCarrying.Type)?._custom(of: value) ?? JSONObject()
        if let coatyType = T.self as? any CoatyObject.Type {
            let header = coatyType._header(of: value)
            let id = openFrame(isObject: true, recordKeys: !custom.isEmpty)
            try member(id, "objectType")
            JSONSerializer.writeString(header.objectType, to: &out)
            try member(id, "coreType")
            JSONSerializer.writeString(header.coreType.rawValue, to: &out)
            frames[frames.count - 1].header = (header.objectType, header.coreType.rawValue)
            encoder.state = .frame(id)
        }
        encoder.recordsKeys = !custom.isEmpty
        do {
            try value.encode(to: encoder)
        } catch {
            // Code that catches this error and goes on would leave a started member or open
            // containers behind: the run is over either way.
            failed = true
            throw error
        }
        encoder.finished = true
        if failed { throw StreamFallback() }

        switch encoder.state {
        case .empty:
            // As the tree encoder: a value that encodes nothing becomes an empty object (plus its
            // custom members, for a carrier).
            guard frames.count == base else { throw fail() }
            let id = openFrame(isObject: true, recordKeys: !custom.isEmpty)
            try writeCustom(custom, into: id)
        case .single:
            guard frames.count == base, custom.isEmpty else { throw fail() }
        case .frame(let id):
            // The value's own container sits at `base`; containers nested in it close first.
            guard index(of: id) == base else { throw fail() }
            closeFrames(downTo: base + 1)
            if frames[base].isObject { try writeCustom(custom, into: id) }
        }
        closeFrames(downTo: base)
    }

    /// Appends the custom members of innermost frame `id` whose names it does not have yet (a
    /// declared field wins, and so does the first of two equal custom names).
    private func writeCustom(_ custom: JSONObject, into id: Int) throws {
        for (name, member) in custom where !(frames[frames.count - 1].keys ?? []).contains(name) {
            try self.member(id, name)
            JSONSerializer.write(member, to: &out)
        }
    }
}

/// The `Encoder` for one value of a streaming run.
final class StreamEncoder: Encoder, CodingPathNode {
    enum State {
        case empty
        case single
        case frame(Int)
    }

    let context: StreamEncodingContext
    let parent: StreamEncoder?
    let key: (any CodingKey)?
    /// The frame depth where this value starts.
    let base: Int
    @exclusivity(unchecked) var state = State.empty
    /// Set once the value's `encode(to:)` returned: later writes cannot be placed.
    @exclusivity(unchecked) var finished = false
    /// Whether the keyed container records member names (for custom fields).
    @exclusivity(unchecked) var recordsKeys = false

    init(context: StreamEncodingContext, parent: StreamEncoder?, key: (any CodingKey)?, base: Int) {
        self.context = context
        self.parent = parent
        self.key = key
        self.base = base
    }

    /// Computed only when someone asks (errors, custom encode code).
    var codingPath: [any CodingKey] { pathFromRoot }

    var userInfo: [CodingUserInfoKey: Any] { context.userInfo }

    /// The frame of this value's container of the given kind, opened on first use; `0` (no
    /// frame) after marking the run failed when the container cannot be placed.
    func frame(isObject: Bool) -> Int {
        switch state {
        case .frame(let id):
            if let i = context.index(of: id), context.frames[i].isObject == isObject { return id }
        case .empty:
            if !finished && context.frames.count == base {
                let id = context.openFrame(isObject: isObject, recordKeys: isObject && recordsKeys)
                state = .frame(id)
                return id
            }
        case .single:
            break
        }
        _ = context.fail()
        return 0
    }

    /// Claims the single value of this encoder.
    func beginSingle() throws(StreamFallback) {
        guard case .empty = state, !finished, context.frames.count == base else { throw context.fail() }
        state = .single
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedStreamEncoder<Key>(encoder: self, frame: frame(isObject: true)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        UnkeyedStreamEncoder(encoder: self, frame: frame(isObject: false))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleStreamEncoder(encoder: self)
    }

    /// A child for a nested container or super encoder that cannot be streamed: marks the run failed.
    func deadChild(_ key: any CodingKey) -> StreamEncoder {
        _ = context.fail()
        let child = StreamEncoder(context: context, parent: self, key: key, base: -1)
        child.finished = true
        return child
    }
}

struct KeyedStreamEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: StreamEncoder
    /// The object frame written to; 0 when the container could not be placed.
    let frame: Int

    var codingPath: [any CodingKey] { encoder.codingPath }

    private var context: StreamEncodingContext { encoder.context }

    /// Starts member `key`; `false` when it is a header member already written with `value`.
    @inline(__always)
    private func begin(_ key: Key, headerText value: String? = nil) throws -> Bool {
        let name = key.stringValue
        if let written = context.headerValue(frame, name) {
            guard let value, value == written else { throw context.fail() }
            return false
        }
        try context.member(frame, name)
        return true
    }

    private func number(_ value: JSONValue, _ key: Key) throws {
        guard try begin(key) else { return }
        JSONSerializer.write(value, to: &context.out)
    }

    mutating func encodeNil(forKey key: Key) throws { try number(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try number(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws {
        guard try begin(key, headerText: value) else { return }
        JSONSerializer.writeString(value, to: &context.out)
    }
    mutating func encode(_ value: Double, forKey key: Key) throws { try number(jsonNumber(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try number(floatNumber(value), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try number(.int(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try number(.int(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try number(.int(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try number(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try number(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try number(unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try number(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try number(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try number(.int(Int64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try number(unsigned(value), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        let headerText: String? =
            T.self == String.self
            ? _identityCast(value, to: String.self)
            : T.self == CoreType.self ? _identityCast(value, to: CoreType.self).rawValue : nil
        guard try begin(key, headerText: headerText) else { return }
        try context.write(value, into: frame, parent: encoder, key: key)
    }

    // Absent optionals are skipped, as by the protocol's default; implemented here so the value
    // reaches `encode` without the default's extra generic hop (a fifth of a typical object's time).
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) }
    }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) }
    }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        let (child, id) = nested(key, isObject: true)
        return KeyedEncodingContainer(KeyedStreamEncoder<NestedKey>(encoder: child, frame: id))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let (child, id) = nested(key, isObject: false)
        return UnkeyedStreamEncoder(encoder: child, frame: id)
    }

    /// Opens a nested container as member `key`, with an encoder carrying the key for coding
    /// paths; frame 0 after marking the run failed. The tree encoder puts a nested container in
    /// place of an earlier member of the same name, which a stream cannot: such a key falls back.
    private func nested(_ key: Key, isObject: Bool) -> (StreamEncoder, Int) {
        let child = StreamEncoder(context: context, parent: encoder, key: key, base: -1)
        child.finished = true
        guard !context.mayHave(frame, key.stringValue), (try? begin(key)) == true else {
            _ = context.fail()
            return (child, 0)
        }
        let id = context.openFrame(isObject: isObject, recordKeys: false)
        child.state = .frame(id)
        return (child, id)
    }

    mutating func superEncoder() -> any Encoder { encoder.deadChild(JSONCodingKey.superKey) }

    mutating func superEncoder(forKey key: Key) -> any Encoder { encoder.deadChild(key) }
}

struct UnkeyedStreamEncoder: UnkeyedEncodingContainer {
    let encoder: StreamEncoder
    /// The array frame written to; 0 when the container could not be placed.
    let frame: Int

    var codingPath: [any CodingKey] { encoder.codingPath }

    var count: Int {
        guard let i = context.index(of: frame) else {
            // Asked after the container was closed: only the tree knows.
            _ = context.fail()
            return 0
        }
        return context.frames[i].count
    }

    private var context: StreamEncodingContext { encoder.context }

    private func number(_ value: JSONValue) throws {
        try context.element(frame)
        JSONSerializer.write(value, to: &context.out)
    }

    mutating func encodeNil() throws { try number(.null) }
    mutating func encode(_ value: Bool) throws { try number(.bool(value)) }
    mutating func encode(_ value: String) throws {
        try context.element(frame)
        JSONSerializer.writeString(value, to: &context.out)
    }
    mutating func encode(_ value: Double) throws { try number(jsonNumber(value)) }
    mutating func encode(_ value: Float) throws { try number(floatNumber(value)) }
    mutating func encode(_ value: Int) throws { try number(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { try number(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { try number(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { try number(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { try number(.int(value)) }
    mutating func encode(_ value: UInt) throws { try number(unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { try number(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { try number(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { try number(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { try number(unsigned(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let key = JSONCodingKey(intValue: count)
        try context.element(frame)
        try context.write(value, into: frame, parent: encoder, key: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<
        NestedKey
    > {
        let (child, id) = nested(isObject: true)
        return KeyedEncodingContainer(KeyedStreamEncoder<NestedKey>(encoder: child, frame: id))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let (child, id) = nested(isObject: false)
        return UnkeyedStreamEncoder(encoder: child, frame: id)
    }

    /// Opens a nested container as the next element, with an encoder carrying its index for
    /// coding paths; frame 0 after marking the run failed.
    private func nested(isObject: Bool) -> (StreamEncoder, Int) {
        let child = StreamEncoder(context: context, parent: encoder, key: JSONCodingKey(intValue: count), base: -1)
        child.finished = true
        guard (try? context.element(frame)) != nil else { return (child, 0) }
        let id = context.openFrame(isObject: isObject, recordKeys: false)
        child.state = .frame(id)
        return (child, id)
    }

    mutating func superEncoder() -> any Encoder { encoder.deadChild(JSONCodingKey(intValue: count)) }
}

struct SingleStreamEncoder: SingleValueEncodingContainer {
    let encoder: StreamEncoder

    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ value: JSONValue) throws {
        try encoder.beginSingle()
        JSONSerializer.write(value, to: &encoder.context.out)
    }

    mutating func encodeNil() throws { try set(.null) }
    mutating func encode(_ value: Bool) throws { try set(.bool(value)) }
    mutating func encode(_ value: String) throws {
        try encoder.beginSingle()
        JSONSerializer.writeString(value, to: &encoder.context.out)
    }
    mutating func encode(_ value: Double) throws { try set(jsonNumber(value)) }
    mutating func encode(_ value: Float) throws { try set(floatNumber(value)) }
    mutating func encode(_ value: Int) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { try set(.int(value)) }
    mutating func encode(_ value: UInt) throws { try set(unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { try set(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { try set(unsigned(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try encoder.beginSingle()
        try encoder.context.write(value, parent: encoder.parent, key: encoder.key)
    }
}
