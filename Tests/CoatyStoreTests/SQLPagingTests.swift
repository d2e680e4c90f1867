import CoatyCore
import CoatyStore
import Testing

@Suite("Paging pushed into SQL")
struct SQLPagingTests {
    @Test("exactSQLPaging: skip and take as Coaty pages them; nothing pushed for ordering or a negative take")
    func paging() {
        #expect(ObjectFilter().exactSQLPaging! == (0, nil))
        #expect(ObjectFilter().skip(5).exactSQLPaging! == (5, nil))
        #expect(ObjectFilter().take(3).exactSQLPaging! == (0, 3))
        #expect(ObjectFilter().skip(-2).take(0).exactSQLPaging! == (0, nil))
        #expect(ObjectFilter().take(-1).exactSQLPaging == nil)
        var ordered = ObjectFilter().take(3)
        ordered.orderByProperties = [ObjectFilterOrdering("name")]
        #expect(ordered.exactSQLPaging == nil)
        ordered.orderByProperties = []
        #expect(ordered.exactSQLPaging! == (0, 3))
    }
}
